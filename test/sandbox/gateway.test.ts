import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GatewayClient } from '../../src/cli/gateway-client.js';
import { main } from '../../src/cli/main.js';
import type { Runtime } from '../../src/runtime.js';
import { type FakeOpenAIServer, startFakeOpenAIServer } from '../helpers/fake-openai-server.js';
import { collectRun, startRuntime, tempHome } from '../runtime/helpers.js';

const javascriptProgram = `
const recorded = await tools.ledger_append({ entry_type: 'finding', content: 'js found 42' });
return { answer: 6 * 7, recorded };
`;
const pythonProgram = `
recorded = await tools.ledger_append(entry_type="decision", content="python chose " + str(sum(range(5))))
{"total": sum(range(5)), "recorded": recorded}
`;

function toolCallTurn(id: string, language: string, code: string) {
  return {
    type: 'stream' as const,
    toolCalls: [{ id, name: 'execute_code', argumentChunks: [JSON.stringify({ language, code })] }],
  };
}

describe('execute_code through the gateway with an OpenAI-compatible model', () => {
  let server: FakeOpenAIServer;
  let runtime: Runtime;
  let client: GatewayClient;
  const home = tempHome('agentd-sandbox-');

  beforeAll(async () => {
    server = await startFakeOpenAIServer();
    // Pyodide takes seconds to start on a busy machine: let it load while the JavaScript part runs.
    writeFileSync(join(home, 'agentd.yaml'), 'sandbox:\n  prewarm: [python]\n  start_timeout_ms: 170000\n');
    const started = await startRuntime({
      home,
      env: { OPENAI_BASE_URL: server.baseURL, OPENAI_API_KEY: 'sk-e2e', AGENTD_MODEL: 'openai/gpt-test' },
    });
    runtime = started.runtime;
    client = await started.connect();
  });
  afterAll(async () => {
    await client?.close();
    await runtime?.close();
    await server?.close();
  });

  it('runs JavaScript and Python that write the ledger, and the model sees the values', async () => {
    server.respond(
      toolCallTurn('call_js', 'javascript', javascriptProgram),
      toolCallTurn('call_py', 'python', pythonProgram),
      { type: 'stream', text: ['Both programs ran.'] },
    );
    let workItemId: string | undefined;
    const off = runtime.bus.on('run:started', (event) => {
      workItemId ??= event.data.workItemId;
    });
    const done = collectRun(client, 'sandbox-e2e');
    const ack = await client.call<{ runId: string }>('chat.send', {
      sessionKey: 'agent:main:main',
      message: 'compute things in code',
      idempotencyKey: 'sandbox-e2e',
    });
    expect(ack.runId).toBe('sandbox-e2e');
    const events = await done;
    off();
    expect(events.at(-1)!.payload.state).toBe('final');

    // The tool list offered to the model includes execute_code.
    const offered = (server.requests[0]!.body.tools as Array<{ function: { name: string } }>).map(
      (tool) => tool.function.name,
    );
    expect(offered).toContain('execute_code');

    const toolMessage = (requestIndex: number, id: string) =>
      (
        server.requests[requestIndex]!.body.messages as Array<{
          role: string;
          tool_call_id?: string;
          content: string;
        }>
      ).find((message) => message.role === 'tool' && message.tool_call_id === id)!;
    const jsReport = JSON.parse(toolMessage(1, 'call_js').content);
    expect(jsReport.result).toEqual({ answer: 42, recorded: 'Recorded finding #1.' });
    expect(jsReport.toolCalls).toEqual([{ id: 'call_js.1', name: 'ledger_append', status: 'ok' }]);
    const pyReport = JSON.parse(toolMessage(2, 'call_py').content);
    expect(pyReport.result).toEqual({ total: 10, recorded: 'Recorded decision #2.' });
    expect(pyReport.toolCalls).toEqual([{ id: 'call_py.1', name: 'ledger_append', status: 'ok' }]);

    // Clients see the program's tool calls as tool events, like the model's own.
    const wire = JSON.stringify(events);
    expect(wire).toContain('call_js.1');
    expect(wire).toContain('call_py.1');

    let out = '';
    const code = await main(['node', 'agentd', '--home', home, 'ledger', 'show', workItemId!], {
      stdout: (text) => {
        out += text;
      },
      stderr: () => {},
    });
    expect(code).toBe(0);
    expect(out).toBe('[1] finding: js found 42\n[2] decision: python chose 10\n');
  }, 180_000);
});
