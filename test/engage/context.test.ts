import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  blockSummaryLimits,
  formatBlockSummary,
  formatLedgerForContext,
  pairSafeTail,
} from '../../src/engage/index.js';
import type { LedgerEntry } from '../../src/ledger/index.js';
import { estimateTokens, type ModelMessage, type ModelRequest } from '../../src/model/index.js';
import { defineTool } from '../../src/tools/index.js';
import { createHarness } from './helpers.js';

const entry = (seq: number, entryType: LedgerEntry['entryType'], content: string): LedgerEntry => ({
  workItemId: 'w',
  seq,
  entryType,
  content,
  createdAt: 0,
});

/** Every tool result follows the assistant message that called it, and every call has its result. */
function assertPairsIntact(messages: ReadonlyArray<ModelMessage>) {
  let pending = new Set<string>();
  for (const message of messages) {
    if (message.role === 'tool') {
      expect(pending.has(message.toolCallId), `orphan tool result ${message.toolCallId}`).toBe(true);
      pending.delete(message.toolCallId);
      continue;
    }
    expect([...pending], 'tool calls without results').toEqual([]);
    pending = new Set(message.role === 'assistant' ? (message.toolCalls ?? []).map((call) => call.id) : []);
  }
}

describe('context helpers', () => {
  it('pairSafeTail never starts with a tool result', () => {
    const messages: ModelMessage[] = [
      { role: 'user', content: 'u' },
      {
        role: 'assistant',
        content: '',
        toolCalls: [
          { id: 'a', name: 't', arguments: {} },
          { id: 'b', name: 't', arguments: {} },
        ],
      },
      { role: 'tool', toolCallId: 'a', toolName: 't', content: '1' },
      { role: 'tool', toolCallId: 'b', toolName: 't', content: '2' },
      { role: 'assistant', content: 'done' },
    ];
    expect(pairSafeTail(messages, 2)).toEqual(messages.slice(1));
    expect(pairSafeTail(messages, 1)).toEqual(messages.slice(4));
    expect(pairSafeTail(messages, 0)).toEqual([]);
    expect(pairSafeTail(messages, 10)).toEqual(messages);
  });

  it('the ledger message groups by type, shows only the latest plan and cuts old entries to fit', () => {
    const entries = [
      entry(1, 'plan', 'old plan'),
      entry(2, 'finding', 'f1'),
      entry(3, 'step', 'first step'),
      entry(4, 'plan', 'new plan'),
      entry(5, 'decision', 'use X'),
      entry(6, 'error', 'Y failed'),
      entry(7, 'finding', 'f2'),
    ];
    expect(formatLedgerForContext(entries, 10_000)).toBe(
      [
        '=== WORK LEDGER ===',
        'Your ledger for this work so far (older messages were compacted away):',
        'PLAN (latest):',
        '[4] new plan',
        'FINDINGS:',
        '[2] f1',
        '[7] f2',
        'STEPS COMPLETED:',
        '[3] first step',
        'DECISIONS:',
        '[5] use X',
        'ERRORS:',
        '[6] Y failed',
      ].join('\n'),
    );
    const many = Array.from({ length: 100 }, (_, index) =>
      entry(index + 1, 'note', `note number ${index + 1} `.repeat(5)),
    );
    const text = formatLedgerForContext(many, 1000);
    expect(text.length).toBeLessThan(1400);
    expect(text).toContain('earlier note entries omitted; use ledger_read');
    expect(text).toContain('[100] note number 100');
  });
});

describe('bounded sub-contexts in the loop', () => {
  it('a step entry closes the block: the next request carries the summary instead of the block', async () => {
    const harness = await createHarness({
      model: {
        steps: [
          { toolCalls: [{ name: 'noop', arguments: { n: 1 } }] },
          {
            toolCalls: [
              { name: 'ledger_append', arguments: { entry_type: 'step', content: 'did\nA' } },
              { name: 'noop', arguments: { n: 2 } },
            ],
          },
          { text: 'finished' },
        ],
      },
    });
    const result = await harness.run();
    expect(harness.model.requests[2]!.messages).toEqual([
      { role: 'system', content: 'You are a test agent.' },
      { role: 'user', content: 'Do the task.' },
      { role: 'user', content: '[completed step 1: did A]' },
    ]);
    expect(result.newMessages).toHaveLength(6);
    expect(harness.events.find((event) => event.type === 'engage:compacted')).toMatchObject({
      data: { trigger: 'step', messagesBefore: 7, messagesAfter: 3, ledgerEntriesUsed: 1 },
    });
  });

  it("a closed block's summary keeps the findings and decisions written in it, and only those", async () => {
    const harness = await createHarness({
      model: {
        steps: [
          {
            toolCalls: [
              {
                name: 'ledger_append',
                arguments: { entry_type: 'finding', content: 'The API pages at\n100.' },
              },
              { name: 'noop', arguments: { n: 1 } },
            ],
          },
          {
            toolCalls: [
              { name: 'ledger_append', arguments: { entry_type: 'decision', content: 'Use cursors.' } },
              { name: 'ledger_append', arguments: { entry_type: 'note', content: 'a note' } },
              { name: 'ledger_append', arguments: { entry_type: 'step', content: 'read the API' } },
            ],
          },
          {
            toolCalls: [
              { name: 'ledger_append', arguments: { entry_type: 'finding', content: 'Rate limit is 10/s.' } },
              { name: 'ledger_append', arguments: { entry_type: 'step', content: 'measured limits' } },
            ],
          },
          { text: 'finished' },
        ],
      },
    });
    await harness.run();
    expect(harness.model.requests[2]!.messages.at(-1)).toEqual({
      role: 'user',
      content: [
        '[completed step 4: read the API]',
        'Learned in this step:',
        '  finding #1: The API pages at 100.',
        '  decision #2: Use cursors.',
      ].join('\n'),
    });
    expect(harness.model.requests[3]!.messages.slice(2)).toEqual([
      harness.model.requests[2]!.messages.at(-1),
      {
        role: 'user',
        content: [
          '[completed step 6: measured limits]',
          'Learned in this step:',
          '  finding #5: Rate limit is 10/s.',
        ].join('\n'),
      },
    ]);
  });

  it('caps what a summary keeps, newest first, and says how much is left in the ledger', () => {
    const learned = Array.from({ length: 14 }, (_, index) => ({
      seq: index + 1,
      entryType: (index % 2 === 0 ? 'finding' : 'decision') as 'finding' | 'decision',
      content: `fact ${index + 1} ${'x'.repeat(400)}`,
    }));
    const summary = formatBlockSummary([{ seq: 15, content: 'done' }], learned);
    const lines = summary.split('\n');
    expect(lines[0]).toBe('[completed step 15: done]');
    expect(lines[1]).toBe('Learned in this step:');
    const kept = lines.filter((line) => /^ {2}(finding|decision) #/.test(line));
    expect(kept.length).toBeLessThanOrEqual(blockSummaryLimits.maxEntries);
    expect(kept.join('\n').length).toBeLessThanOrEqual(blockSummaryLimits.maxChars);
    expect(kept.at(-1)).toMatch(/^ {2}decision #14: fact 14 x+…$/);
    expect(lines.at(-1)).toBe(
      `  (${14 - kept.length} earlier finding(s)/decision(s) of this step are in the ledger: ledger_read)`,
    );
    expect(formatBlockSummary([{ seq: 2, content: 'only a step' }], [])).toBe(
      '[completed step 2: only a step]',
    );
  });

  it('nudges after ledgerNudgeInterval turns without a ledger write', async () => {
    const harness = await createHarness({
      model: {
        steps: [
          { toolCalls: [{ name: 'noop', arguments: {} }] },
          { toolCalls: [{ name: 'noop', arguments: {} }] },
          { text: 'ok' },
        ],
      },
    });
    await harness.run({ context: { ledgerNudgeInterval: 2 } });
    expect(harness.model.requests[1]!.messages.at(-1)!.role).toBe('tool');
    expect(harness.model.requests[2]!.messages.at(-1)).toEqual({
      role: 'user',
      content: expect.stringContaining('2 turns have passed without a ledger entry'),
    });
    expect(
      harness.events.filter((event) => event.type === 'engage:nudged').map((event) => event.data),
    ).toEqual([{ runId: 'run_1', turnsWithoutLedgerWrite: 2 }]);
  });

  it('falls back to emergency summarisation by the model when the ledger is too thin', async () => {
    const big = defineTool({
      name: 'big',
      description: 'b',
      input: z.object({}),
      execute: async () => 'y'.repeat(1200),
    });
    const harness = await createHarness({ tools: [big], model: { contextWindowTokens: 2000 } });
    const turnsBeforeDone = 8;
    let turn = 0;
    // Enough responders for every work turn plus any number of summarisation calls in between.
    harness.model.push(
      ...Array.from({ length: turnsBeforeDone * 2 + 1 }, () => (request: ModelRequest) => {
        if (request.metadata?.purpose === 'compaction')
          return { text: 'SUMMARY: fetched big data', usage: { inputTokens: 50, outputTokens: 7 } };
        turn++;
        return turn > turnsBeforeDone ? { text: 'done' } : { toolCalls: [{ name: 'big', arguments: {} }] };
      }),
    );
    const result = await harness.run({ context: { ledgerNudgeInterval: 0, compactKeepRecent: 2 } });
    expect(result.error).toBeUndefined();
    expect(result.status).toBe('completed');
    const emergency = harness.events.filter((event) => event.type === 'engage:compacted');
    expect(emergency.length).toBeGreaterThan(0);
    expect(emergency.every((event) => (event.data as { trigger: string }).trigger === 'emergency')).toBe(
      true,
    );
    const work = harness.model.requests.filter((request) => request.metadata?.purpose !== 'compaction');
    for (const request of work) {
      expect(estimateTokens(request.messages)).toBeLessThanOrEqual(1400);
      assertPairsIntact(request.messages);
    }
    expect(
      work
        .at(-1)!
        .messages.some((message) =>
          message.content.startsWith('[summary of earlier work]\nSUMMARY: fetched big data'),
        ),
    ).toBe(true);
    expect(result.usage.outputTokens).toBe(7 * emergency.length);
    expect(result.compactions).toBe(emergency.length);
  });
});

describe('a long scripted run', () => {
  it('200 turns with steps: context stays under the threshold, pairs are never split, the ledger has every step', async () => {
    const chunk = defineTool({
      name: 'fetch_chunk',
      description: 'returns a chunk of data',
      input: z.object({ n: z.number().int() }),
      execute: async (args) => `chunk ${args.n}: ${'data '.repeat(160)}`,
    });
    const contextWindowTokens = 4000;
    const threshold = Math.floor(contextWindowTokens * 0.7);
    const harness = await createHarness({ tools: [chunk], model: { contextWindowTokens } });
    const totalTurns = 200;
    let turn = 0;
    let steps = 0;
    const responder = (request: ModelRequest) => {
      if (request.metadata?.purpose === 'compaction') return { text: 'summary' };
      const n = turn++;
      if (n === totalTurns) return { text: 'all chunks processed' };
      const calls: Array<{ name: string; arguments: Record<string, unknown> }> = [
        { name: 'fetch_chunk', arguments: { n } },
      ];
      // Turns 100–159 never close a block, so only threshold compaction can keep the context bounded there.
      const stepsAllowed = n < 100 || n >= 160;
      if (stepsAllowed && n % 5 === 4)
        calls.push({
          name: 'ledger_append',
          arguments: { entry_type: 'step', content: `processed chunks up to ${n}` },
        });
      else if (n % 5 === 0)
        calls.push({
          name: 'ledger_append',
          arguments: { entry_type: 'finding', content: `chunk ${n} looks fine` },
        });
      if (stepsAllowed && n % 5 === 4) steps++;
      return { toolCalls: calls, usage: { inputTokens: 10, outputTokens: 5 } };
    };
    harness.model.push(...Array.from({ length: totalTurns + 1 }, () => responder));
    const result = await harness.run({ limits: { maxTurns: totalTurns + 1 } });

    expect(result).toMatchObject({
      status: 'completed',
      text: 'all chunks processed',
      turns: totalTurns + 1,
    });
    harness.model.assertAllConsumed();
    expect(harness.model.requests).toHaveLength(totalTurns + 1);
    const toolDefinitionTokens = estimateTokens(JSON.stringify(harness.model.requests[0]!.tools));
    let maxSeen = 0;
    for (const request of harness.model.requests) {
      const tokens = estimateTokens(request.messages) + toolDefinitionTokens;
      maxSeen = Math.max(maxSeen, tokens);
      assertPairsIntact(request.messages);
      // The request that started it all is always there.
      expect(request.messages[1]).toEqual({ role: 'user', content: 'Do the task.' });
    }
    expect(maxSeen).toBeLessThanOrEqual(threshold);
    expect(maxSeen).toBeGreaterThan(threshold / 2);

    const triggers = new Set(
      harness.events
        .filter((event) => event.type === 'engage:compacted')
        .map((event) => (event.data as { trigger: string }).trigger),
    );
    expect(triggers).toEqual(new Set(['step', 'threshold']));
    const ledgerSteps = await harness.ledger.read('work_1', { entryType: 'step' });
    expect(ledgerSteps).toHaveLength(steps);
    expect(steps).toBe(28);
    // The full transcript is returned uncompacted.
    expect(result.newMessages.filter((message) => message.role === 'assistant')).toHaveLength(totalTurns + 1);
    expect(result.newMessages.filter((message) => message.role === 'tool')).toHaveLength(
      totalTurns + steps + 40,
    );
  });
});
