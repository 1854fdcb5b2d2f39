import { afterAll, describe, expect, it } from 'vitest';
import {
  createExecuteCodeTool,
  createSandboxPool,
  type SandboxPool,
  sandboxConfigSchema,
} from '../../src/sandbox/index.js';
import { createHookPipeline, createPolicy, type Hook } from '../../src/tools/index.js';
import { createHarness } from '../engage/helpers.js';

let pool: SandboxPool | undefined;
afterAll(async () => {
  await pool?.close();
});

function executeCode() {
  pool ??= createSandboxPool({});
  return createExecuteCodeTool({ pool, config: sandboxConfigSchema.parse({}) });
}

const program = `
await tools.noop({ n: 1 });
await tools.ledger_append({ entry_type: 'step', content: 'did A from code' });
return 'ok';
`;

describe('execute_code inside the engage loop', () => {
  it('a step entry written from code closes the context block like one the model writes', async () => {
    const harness = await createHarness({
      tools: [executeCode()],
      model: {
        steps: [
          { toolCalls: [{ name: 'noop', arguments: { n: 0 } }] },
          {
            toolCalls: [
              { id: 'call_code', name: 'execute_code', arguments: { language: 'javascript', code: program } },
            ],
          },
          { text: 'finished' },
        ],
      },
    });
    const result = await harness.run();
    expect(result.status).toBe('completed');
    expect(harness.model.requests[2]!.messages).toEqual([
      { role: 'system', content: 'You are a test agent.' },
      { role: 'user', content: 'Do the task.' },
      { role: 'user', content: '[completed step 1: did A from code]' },
    ]);
    expect(harness.events.find((event) => event.type === 'engage:compacted')).toMatchObject({
      data: { trigger: 'step', ledgerEntriesUsed: 1 },
    });
    // The program's calls are tool events of the run, with ids under the execute_code call.
    const started = harness.events
      .filter((event) => event.type === 'run:tool-started')
      .map((event) => (event.data as { toolCallId: string; toolName: string }).toolCallId);
    expect(started).toEqual(expect.arrayContaining(['call_code', 'call_code.1', 'call_code.2']));
    const sandboxEvents = harness.events.filter((event) => event.type.startsWith('sandbox:'));
    expect(sandboxEvents.map((event) => event.type)).toEqual([
      'sandbox:started',
      'sandbox:tool-call',
      'sandbox:tool-call',
      'sandbox:finished',
    ]);
    expect(sandboxEvents.at(-1)!.data).toMatchObject({ ok: true, toolCalls: 2, language: 'javascript' });
  });

  it('hooks and agent-scoped policy see calls made from code', async () => {
    const seen: string[] = [];
    const blockNoop: Hook = {
      name: 'no-noop-from-code',
      events: ['before_tool_call'],
      handle(_event, payload) {
        const call = payload as { toolName: string; toolCallId: string };
        seen.push(`${call.toolName}:${call.toolCallId}`);
        return call.toolName === 'noop' ? { action: 'block', reason: 'noop is off' } : { action: 'allow' };
      },
    };
    const harness = await createHarness({
      tools: [executeCode()],
      model: {
        steps: [
          {
            toolCalls: [
              {
                id: 'call_x',
                name: 'execute_code',
                arguments: {
                  language: 'javascript',
                  code: `const out = [];
                    for (const name of ['noop', 'ledger_read']) {
                      try { await tools[name]({}); out.push(name + ' ran'); } catch (e) { out.push(e.message); }
                    }
                    return out;`,
                },
              },
            ],
          },
          { text: 'done' },
        ],
      },
    });
    await harness.run({
      hooks: createHookPipeline({ hooks: [blockNoop] }),
      policy: createPolicy({
        policies: [
          { name: 'p', rules: [{ target_id: 'ledger_read', agent: 'main', action: 'deny', reason: 'no' }] },
        ],
      }),
    });
    expect(seen).toEqual(['execute_code:call_x', 'noop:call_x.1', 'ledger_read:call_x.2']);
    const report = JSON.parse(
      harness.model.requests[1]!.messages.find((message) => message.role === 'tool')!.content,
    );
    expect(report.result).toEqual([
      'Blocked by hook no-noop-from-code: noop is off',
      'Policy denied ledger_read: no. The call was not run.',
    ]);
  });
});
