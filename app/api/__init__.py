"""The HTTP edge: routers, request/response models and dependency wiring."""
