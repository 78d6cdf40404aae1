"""Tools the expert may call, served by MCP servers (the Model Context Protocol): their
configuration (`tools.config`), one connection per server (`tools.servers`) and the
`Toolbox` the engine calls (`tools.toolbox`). Only `tools.config` loads without
MCP_SERVERS; the others import the `mcp` SDK, which a deployment without tool servers
never loads."""
