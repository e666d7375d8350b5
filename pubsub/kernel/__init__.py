"""The kernel: what every protocol mode and every layer above shares.

Message base class and registry (`message`), the wire codec that knows no mode's types
(`wire`), the sans-I/O frame decoder (`framing`), the generic control-plane messages
(`control`) and the contracts a mode implements (`contracts`).  The kernel imports nothing
else of the project (docs/architecture.md, "Layers").
"""
