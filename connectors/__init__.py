"""Backends, each declaring its capabilities by the mixins it inherits.

Import the capability interfaces from `connectors.base` and the exchanged values from
`connectors.contract.records`; concrete connectors load lazily through `connectors.registry`.
"""
