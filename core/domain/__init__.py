"""The consultation's domain: its types, the ports the edges implement, errors, outcomes,
clarifying rounds, attachments, usage, quotas, stats and facts. Imports only
`core.primitives`: value types live here, never in a module that imports the port."""
