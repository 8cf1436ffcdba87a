"""Write use cases of the leasing app, one module per entity; `<entity>_<verb>` names."""
