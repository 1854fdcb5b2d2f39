import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import WebSocket from 'ws';
import { connectGateway, type GatewayClient } from '../../src/cli/gateway-client.js';
import { loadConfig } from '../../src/config/index.js';
import type { LanguageModel } from '../../src/model/index.js';
import { createRuntime, type Runtime } from '../../src/runtime.js';
import type { Clock } from '../../src/util/index.js';

export function tempHome(prefix = 'agentd-runtime-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export interface CapturedLog {
  stream: Writable;
  text(): string;
}

export function captureLog(): CapturedLog {
  const chunks: string[] = [];
  return {
    stream: new Writable({
      write(chunk, _encoding, done) {
        chunks.push(String(chunk));
        done();
      },
    }),
    text: () => chunks.join(''),
  };
}

export async function startRuntime(
  options: {
    home?: string;
    model?: LanguageModel;
    env?: NodeJS.ProcessEnv;
    log?: CapturedLog;
    clock?: Clock;
  } = {},
): Promise<{
  runtime: Runtime;
  url: string;
  connect(protocol?: 3 | 4): Promise<GatewayClient>;
}> {
  const home = options.home ?? tempHome();
  const env = { ...(options.env ?? {}), AGENTD_HOME: home };
  const config = loadConfig({ cwd: home, env, overrides: { port: 0 } });
  const runtime = await createRuntime({
    config,
    env,
    ...(options.model ? { model: options.model } : {}),
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.log ? { logDestination: options.log.stream } : { logDestination: captureLog().stream }),
  });
  const { url } = await runtime.startGateway({ port: 0 });
  return {
    runtime,
    url,
    connect: (protocol = 4) => connectGateway({ url, token: runtime.state.token, protocol }),
  };
}

/** Collects `chat` events of one run until it ends. */
export function collectRun(
  client: GatewayClient,
  runId: string,
): Promise<Array<{ event: string; payload: any }>> {
  return new Promise((resolve) => {
    const events: Array<{ event: string; payload: any }> = [];
    const off = client.onEvent((event, payload) => {
      if (payload?.runId !== runId) return;
      events.push({ event, payload });
      if (event === 'chat' && ['final', 'aborted', 'error'].includes(payload.state)) {
        off();
        resolve(events);
      }
    });
  });
}

/**
 * A Spiderweb client that keeps every frame; `next` resolves with the first received frame that matches
 * (already received or still to come).
 */
export async function connectSpiderweb(url: string) {
  const socket = new WebSocket(url);
  const received: any[] = [];
  // Listening before `open`: the server's session.ack can arrive in the same chunk as the upgrade.
  socket.on('message', (data) => received.push(JSON.parse(String(data))));
  await new Promise((resolve, reject) => {
    socket.once('open', resolve);
    socket.once('error', reject);
  });
  const next = async (match: (message: any) => boolean) => {
    for (;;) {
      const found = received.find(match);
      if (found) return found;
      await new Promise((resolve) => socket.once('message', resolve));
    }
  };
  return { socket, received, next, send: (frame: unknown) => socket.send(JSON.stringify(frame)) };
}
