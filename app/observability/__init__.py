"""What an operator sees: Prometheus metrics (metrics.py, exposition.py) and structured logs
(logs.py). No FastAPI here: the domain packages import the metrics they record, and the HTTP
edge (app/api/observe.py) adds the per-request ones."""
