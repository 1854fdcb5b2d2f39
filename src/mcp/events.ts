declare module '../bus/events.js' {
  interface BusEventMap {
    /** An MCP server connected (or reconnected) and its tools are registered. */
    'mcp:server-ready': { server: string; transport: 'stdio' | 'http'; tools: string[]; attempt: number };
    /** Connecting failed or a connected server went away; its tools are unregistered until a retry works. */
    'mcp:server-failed': { server: string; error: string; attempt: number; retryInMs: number };
    /** The server announced `tools/list_changed` and the registered tools were replaced. */
    'mcp:tools-changed': { server: string; tools: string[] };
  }
}

export {};
