// The passes of the example plugin report bad options on the module.

// expected-error @below {{site-cap-pipeline-depth: pipeline_cap: the deepest pipeline allowed must be at least 1, got 0}}
module {}
