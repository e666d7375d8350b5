"""Scripted experiments on a local cluster (`pubsub experiment run`): scenario files, the
runner that plays them and collects the event stream, and the shipped scenarios."""
