import { describe, expect, it } from 'vitest';
import { createMemoryManager } from '../../src/memory/index.js';
import { startSpan } from '../../src/telemetry/index.js';
import { SystemError } from '../../src/util/index.js';
import { openTestDatabase } from '../helpers/databases.js';
import { createHarness, sessionRef } from '../memory/memory-fixtures.js';
import { namesOf, useTracing } from './otel-harness.js';

const tracing = useTracing();

describe('the spans of a memory manager pass', () => {
  it('a pass is a trace of its own with a span per loaded session', async () => {
    const db = await openTestDatabase('sqlite');
    try {
      const { memory, clock } = createHarness(db, {
        config: { maxActiveEntries: 8, summarizeBatch: 3, thresholds: { summarizeRatio: 0.75 } },
      });
      const busy = sessionRef('busy');
      const quiet = sessionRef('quiet');
      for (let index = 1; index <= 8; index++)
        await memory.append(busy, { role: 'user', content: `message ${index}` });
      await memory.append(quiet, { role: 'user', content: 'hello' });
      const codes: string[] = [];
      const manager = createMemoryManager({ memory, clock, onError: (code) => codes.push(code) });

      // Whatever is active when the timer fires did not cause the pass.
      const unrelated = startSpan('unrelated');
      const result = await manager.tick();
      unrelated.end();
      expect(result.summaries).toBeGreaterThan(0);

      const tick = tracing.span('memory_manager tick');
      expect(tick.parentSpanContext).toBeUndefined();
      expect(tick.attributes).toMatchObject({
        'agentd.memory.sessions_checked': 2,
        'agentd.memory.summaries': result.summaries,
      });
      expect(namesOf(tracing.tree(tick))).toEqual({
        'memory_manager tick': ['memory_maintain', 'memory_maintain'],
      });
      const sessions = tracing.childrenOf(tick).map((span) => span.attributes['agentd.session.key']);
      expect(sessions.sort()).toEqual([busy.sessionKey, quiet.sessionKey].sort());
      expect(codes).toEqual([]);
    } finally {
      await db.close();
    }
  });

  it('marks the span of a session whose maintenance failed and reports the code', async () => {
    const db = await openTestDatabase('sqlite');
    try {
      const harness = createHarness(db, {
        config: { maxActiveEntries: 8, summarizeBatch: 3, thresholds: { summarizeRatio: 0.75 } },
      });
      const ref = sessionRef('busy');
      for (let index = 1; index <= 8; index++)
        await harness.memory.append(ref, { role: 'user', content: `message ${index}` });
      const memory = Object.assign(Object.create(harness.memory), {
        summarize: async () => {
          throw new SystemError({ code: 'STORE_UNAVAILABLE', message: 'disk gone' });
        },
      });
      const codes: string[] = [];
      const manager = createMemoryManager({
        memory,
        clock: harness.clock,
        onError: (code) => codes.push(code),
      });
      await manager.tick();
      expect(codes).toEqual(['STORE_UNAVAILABLE']);
      const [maintain] = tracing.childrenOf(tracing.span('memory_manager tick'));
      expect(maintain!.attributes['error.type']).toBe('STORE_UNAVAILABLE');
      expect(maintain!.status.code).toBe(2);
    } finally {
      await db.close();
    }
  });
});
