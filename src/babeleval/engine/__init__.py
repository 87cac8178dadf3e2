"""The engine: plain requests in, results out in request order. It knows no task."""
