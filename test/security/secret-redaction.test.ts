import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { GatewayClient } from '../../src/cli/gateway-client.js';
import type { Runtime } from '../../src/runtime.js';
import { createScriptedModel, type ScriptedModel } from '../../src/testing.js';
import { captureLog, startRuntime } from '../runtime/helpers.js';

const configuredKey = 'configured-provider-key-7f3a9c2e11';
const shapes = [
  `sk-ant-api03-${'Q'.repeat(40)}`,
  `sk-proj-${'Z9'.repeat(20)}`,
  `ghp_${'a1B2'.repeat(9)}`,
  'AKIAQWERTYUIOPASDFGH',
  'eyJhbGciOiJIUzI1NiJ9.cGxhbnRlZC1wYXlsb2Fk',
  'MIIEvQIBADANBgkqhkiG9w0BAQEFAASCplanted',
];

function countIn(haystack: string, needles: string[]): number {
  return needles.reduce((total, needle) => total + haystack.split(needle).length - 1, 0);
}

describe('attack: a tool result carries a secret into memory, history and storage', () => {
  let runtime: Runtime | undefined;
  let client: GatewayClient | undefined;
  let model: ScriptedModel | undefined;
  afterEach(async () => {
    await client?.close();
    await runtime?.close();
    model?.assertAllConsumed();
    runtime = client = model = undefined;
  });

  it('read_file of a credentials file leaves zero copies in every sink', async () => {
    model = createScriptedModel({
      steps: [{ toolCalls: [{ name: 'read_file', arguments: { path: 'creds.txt' } }] }, { text: 'read it' }],
    });
    const log = captureLog();
    const started = await startRuntime({ model, log, env: { OPENAI_API_KEY: configuredKey } });
    runtime = started.runtime;
    const secrets = [configuredKey, runtime.state.token, ...shapes];
    writeFileSync(
      join(runtime.state.workspaceDir, 'creds.txt'),
      [
        'db_host=localhost',
        `openai=${configuredKey}`,
        `gateway=${runtime.state.token}`,
        `anthropic=${shapes[0]}`,
        `project=${shapes[1]}`,
        `github=${shapes[2]}`,
        `aws=${shapes[3]}`,
        `Authorization: Bearer ${shapes[4]}`,
        '-----BEGIN PRIVATE KEY-----',
        shapes[5],
        '-----END PRIVATE KEY-----',
      ].join('\n'),
    );
    const busEvents: unknown[] = [];
    runtime.bus.subscribe({}, (event) => busEvents.push(event));
    client = await started.connect();

    const reply = await runtime.sendMessage({ text: 'read creds.txt' });
    expect(reply.status).toBe('completed');

    // The model itself never saw a secret, and the harmless lines survived.
    const seenByModel = JSON.stringify(model.requests[1]!.messages);
    expect(seenByModel).toContain('db_host=localhost');
    expect(seenByModel).toContain('[REDACTED]');
    expect(countIn(seenByModel, secrets)).toBe(0);

    const sessionKey = 'agent:main:main';
    const served = JSON.stringify([
      await client.call('memory.query', { sessionKey, kind: 'all', limit: 128 }),
      await client.call('memory.query', { sessionKey, topic: 'creds', limit: 128 }),
      await client.call('memory.recall', { sessionKey, includeFull: true, limit: 128 }),
      await client.call('chat.history', { sessionKey }),
    ]);
    expect(served).toContain('db_host=localhost');
    expect(countIn(served, secrets)).toBe(0);
    expect(countIn(JSON.stringify(busEvents), secrets)).toBe(0);
    expect(countIn(JSON.stringify(await runtime.store.events.list()), secrets)).toBe(0);
    expect(countIn(log.text(), secrets)).toBe(0);

    const home = runtime.state.home;
    await client.close();
    await runtime.close();
    client = runtime = undefined;
    const stored = ['agentd.db', 'agentd.db-wal']
      .map((file) => join(home, file))
      .filter((path) => existsSync(path))
      .map((path) => readFileSync(path).toString('latin1'))
      .join('');
    // The tool result was stored (so the check below looks at real data), without its secrets.
    expect(stored).toContain('db_host=localhost');
    expect(countIn(stored, secrets)).toBe(0);
  });
});
