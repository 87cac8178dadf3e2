"""Where arrays go: JAX's CPU devices and meshes (devices.py), and the rule table that splits a
model's weights and KV caches over a mesh (sharding.py). Below both loading/ (weights are placed
as they are read) and engine/ (programs run on the placement)."""
