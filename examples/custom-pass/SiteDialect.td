//===- SiteDialect.td - A site's policies, as attributes ---*- tablegen -*-===//

#ifndef SITE_DIALECT
#define SITE_DIALECT

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/DialectBase.td"

def Site_Dialect : Dialect {
  let name = "site";
  let cppNamespace = "::site";
  let summary = "What a cluster site imposes on Partita's strategy search";
  let description = [{
    Attributes that the site-* passes put on the module and that the
    SitePolicy plugin's search rules read.
  }];
  let useDefaultAttributePrinterParser = 1;
}

def Site_PipelineCapAttr : AttrDef<Site_Dialect, "PipelineCap"> {
  let mnemonic = "pipeline_cap";
  let summary = "The deepest pipeline the search may choose, and why";
  let description = [{
    `#site.pipeline_cap<2, "one spare node per job">` on the module makes
    the search reject every strategy with pp > 2, with the reason in the
    search report.
  }];
  let parameters = (ins "int64_t":$maxPp,
                        StringRefParameter<"why the cap exists">:$reason);
  let assemblyFormat = "`<` $maxPp `,` $reason `>`";
  let genVerifyDecl = 1;
}

#endif // SITE_DIALECT
