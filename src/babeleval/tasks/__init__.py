"""Tasks turn documents into engine requests and engine results into metrics; they
never call a model."""
