"""The tool server: KIR's verbs over MCP for outside agents (`kir serve --mcp`, agent.serve.tools)."""
