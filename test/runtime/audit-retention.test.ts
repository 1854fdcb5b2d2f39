import { describe, expect, it, vi } from 'vitest';
import type { Runtime } from '../../src/index.js';
import { createStore, type EventInput } from '../../src/store/index.js';
import { dayMs, homeWithConfig, runtimeIn, useRuntimeHomes } from '../helpers/retention.js';

/** A home whose audit log holds events of the given ages, and whose agentd.yaml is `yaml`. */
async function homeWithEvents(yaml: string, agesMs: number[]): Promise<string> {
  const home = homeWithConfig('agentd-audit-retention-', yaml);
  const store = await createStore({ stateDir: home });
  const now = Date.now();
  await store.events.appendMany(
    agesMs.map((ageMs): EventInput => ({ type: 'test:aged', at: now - ageMs, data: { ageMs } })),
  );
  await store.close();
  return home;
}

const agesKept = async (runtime: Runtime) =>
  (await runtime.store.events.list({ types: ['test:aged'] })).map(
    (event) => (event.data as { ageMs: number }).ageMs,
  );

describe("the runtime's audit log retention", () => {
  const { homes, openIn } = useRuntimeHomes();

  it('deletes at start the events older than audit.retainDays', async () => {
    const home = await homeWithEvents('audit:\n  retainDays: 2\n', [5 * dayMs, 3 * dayMs, dayMs, 0]);
    homes.push(home);
    const runtime = await openIn(home);
    await vi.waitFor(async () => expect(await agesKept(runtime)).toEqual([dayMs, 0]));
  });

  it('keeps 30 days by default, and every event with retainDays: 0', async () => {
    const ages = [40 * dayMs, 29 * dayMs, 0];
    const byDefault = await homeWithEvents('', ages);
    const forever = await homeWithEvents('audit:\n  retainDays: 0\n', ages);
    homes.push(byDefault, forever);

    const pruned = await openIn(byDefault);
    await vi.waitFor(async () => expect(await agesKept(pruned)).toEqual([29 * dayMs, 0]));

    const kept = await runtimeIn(forever);
    // Closing waits for a prune that started, so what is there after close is what retention left.
    await kept.close();
    const store = await createStore({ stateDir: forever });
    try {
      expect(await store.events.list({ types: ['test:aged'] })).toHaveLength(3);
    } finally {
      await store.close();
    }
  });
});
