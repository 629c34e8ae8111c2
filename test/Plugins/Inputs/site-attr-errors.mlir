// The site dialect, loaded from the example plugin, verifies its attribute.

// expected-error @below {{pipeline_cap: the deepest pipeline allowed must be at least 1, got 0}}
module attributes {site.pipeline_cap = #site.pipeline_cap<0, "none">} {}

// -----

// expected-error @below {{expected integer value}}
// expected-error @below {{failed to parse Site_PipelineCapAttr parameter 'maxPp' which is to be a `int64_t`}}
module attributes {site.pipeline_cap = #site.pipeline_cap<"two", "why">} {}
