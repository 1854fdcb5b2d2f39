import { type BusEvent, createBus } from '../../../src/bus/index.js';
import type { EngageOptions } from '../../../src/engage/index.js';
import { createScriptedModel, type ScriptedStep } from '../../../src/testing.js';

/** Options for one run over a scripted model and a fresh bus; `events` collects everything published. */
export function stepOptions(steps: ScriptedStep[] = [], overrides: Partial<EngageOptions> = {}) {
  const bus = createBus();
  const events: BusEvent[] = [];
  bus.subscribe({}, (event) => events.push(event));
  const model = createScriptedModel({ steps, contextWindowTokens: 10_000 });
  const options: EngageOptions = {
    model,
    messages: [
      { role: 'system', content: 'You are a test agent.' },
      { role: 'user', content: 'Do the task.' },
    ],
    workspaceDir: '/nonexistent',
    workItemId: 'work_1',
    scope: { runId: 'run_1', agentId: 'main' },
    bus,
    modelCallOptions: { retry: { maxAttempts: 1 } },
    ...overrides,
  };
  return { options, bus, model, events, types: () => events.map((event) => event.type) };
}
