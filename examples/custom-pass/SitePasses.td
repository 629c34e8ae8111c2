//===- SitePasses.td - The SitePolicy plugin's passes ------*- tablegen -*-===//

#ifndef SITE_PASSES
#define SITE_PASSES

include "mlir/Pass/PassBase.td"

def SiteCapPipelineDepth : Pass<"site-cap-pipeline-depth", "mlir::ModuleOp"> {
  let summary = "Limit the pipeline depth the strategy search may choose";
  let description = [{
    Records `#site.pipeline_cap<max, reason>` on the module. Run it before
    dist-search-strategy (or partita-compile): the plugin's search rule then
    rejects deeper pipelines, and the search report counts them with the
    reason.
  }];
  let options = [
    Option<"maxPp", "max", "int64_t", "0", "Deepest pipeline allowed (>= 1)">,
    Option<"reason", "reason", "std::string", "\"site policy\"",
           "Why, for the search report">,
  ];
  let dependentDialects = ["::site::SiteDialect"];
}

def SiteGemmEfficiency : Pass<"site-gemm-efficiency", "mlir::ModuleOp"> {
  let summary = "Cost GEMMs with efficiencies measured on the site's GPUs";
  let description = [{
    Reads a CSV table of `m,n,k,efficiency` rows (a header line and `#`
    comments allowed; efficiency is the fraction of peak FLOP/s measured)
    and records it on the module as `site.gemm_table`. The plugin's
    cost-model override then gives every GEMM the efficiency of the
    measured shape nearest to it (in log scale), instead of the cost
    model's closed form.
  }];
  let options = [
    Option<"table", "table", "std::string", "", "CSV file of measurements">,
  ];
}

#endif // SITE_PASSES
