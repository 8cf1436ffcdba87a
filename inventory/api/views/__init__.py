"""Views of the inventory API, by concern: `catalog` (GPU models, market observations), `llm`
(the model catalogue), `index` (index sources and fixings), `assets` (sites, nodes, GPUs,
outages) and `imports` (the bulk node import)."""
