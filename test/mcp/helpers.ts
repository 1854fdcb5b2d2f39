import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';

export const calcServerPath = fileURLToPath(new URL('./fixtures/calc-server.mjs', import.meta.url));

export interface HttpMcpServer {
  url: string;
  /** Headers of every request received. */
  headers: IncomingHttpHeaders[];
  close(): Promise<void>;
}

/** A stateless Streamable HTTP MCP server on loopback: a fresh SDK server per request, as the SDK shows. */
export async function startHttpMcpServer(build: () => McpServer): Promise<HttpMcpServer> {
  const headers: IncomingHttpHeaders[] = [];
  const http = createServer(async (request, response) => {
    headers.push(request.headers);
    if (request.method !== 'POST') {
      response.writeHead(405).end();
      return;
    }
    const server = build();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    response.on('close', () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(request, response);
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const { port } = http.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    headers,
    close: () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
}
