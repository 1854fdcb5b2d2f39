import { writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { loadConfig } from '../../src/config/index.js';
import type { GatewayServer } from '../../src/gateway/index.js';
import type { LanguageModel } from '../../src/model/index.js';
import { createRuntime, type Runtime } from '../../src/runtime.js';
import { captureLog, tempHome } from '../runtime/helpers.js';

export interface StartedGateway {
  runtime: Runtime;
  server: GatewayServer;
  /** `ws://127.0.0.1:<port>` */
  url: string;
  port: number;
  token: string;
  home: string;
}

/** A real runtime with its gateway on an ephemeral loopback port; `yaml` becomes its agentd.yaml. */
export async function startGateway(
  options: {
    yaml?: string;
    noAuth?: boolean;
    model?: LanguageModel;
    env?: NodeJS.ProcessEnv;
    /** Reuse a state directory (a restart); default a fresh one. */
    home?: string;
  } = {},
): Promise<StartedGateway> {
  const home = options.home ?? tempHome('agentd-sec-');
  if (options.yaml) writeFileSync(join(home, 'agentd.yaml'), options.yaml);
  const env = { ...(options.env ?? {}), AGENTD_HOME: home };
  const config = loadConfig({ cwd: home, env, overrides: { port: 0 } });
  const runtime = await createRuntime({
    config,
    env,
    logDestination: captureLog().stream,
    ...(options.model ? { model: options.model } : {}),
  });
  const { url, server } = await runtime.startGateway({ port: 0, noAuth: options.noAuth ?? false });
  const port = Number(new URL(url).port);
  return { runtime, server, url, port, token: runtime.state.token, home };
}

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * Sends one hand-written HTTP/1.1 request (a browser's upgrade, a probe) over a raw socket and reads the
 * status line, headers and whatever body arrives before the server closes or switches protocols.
 */
export function rawRequest(port: number, lines: string[]): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let buffer = '';
    const finish = () => {
      const end = buffer.indexOf('\r\n\r\n');
      if (end < 0) return false;
      const [statusLine, ...headerLines] = buffer.slice(0, end).split('\r\n');
      const status = Number(statusLine!.split(' ')[1]);
      const headers = Object.fromEntries(
        headerLines.map((line) => {
          const colon = line.indexOf(':');
          return [line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()];
        }),
      );
      const length = Number(headers['content-length'] ?? Number.NaN);
      const body = buffer.slice(end + 4);
      if (status !== 101 && Number.isFinite(length) && Buffer.byteLength(body) < length) return false;
      socket.destroy();
      resolve({ status, headers, body });
      return true;
    };
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      buffer += chunk;
      finish();
    });
    socket.on('error', reject);
    socket.on('close', () => {
      if (!finish()) reject(new Error(`connection closed before a response: ${JSON.stringify(buffer)}`));
    });
    socket.write(`${lines.join('\r\n')}\r\n\r\n`);
  });
}

/** A WebSocket upgrade request as a browser would send it. */
export function upgradeRequest(path: string, headers: Record<string, string>): string[] {
  return [
    `GET ${path} HTTP/1.1`,
    ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
    'Connection: Upgrade',
    'Upgrade: websocket',
    'Sec-WebSocket-Version: 13',
    'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
  ];
}
