import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createRunState } from '../../../src/engage/run-state.js';
import { prepareRun } from '../../../src/engage/setup.js';
import type { Ledger } from '../../../src/ledger/index.js';
import type { SkillLibrary } from '../../../src/skills/index.js';
import { createToolRegistry, defineTool } from '../../../src/tools/index.js';
import { stepOptions } from './helpers.js';

const tool = (name: string) =>
  defineTool({ name, description: name, input: z.object({}), execute: async () => 'ok' });

describe('engage setup', () => {
  it('joins leading system messages into the prompt, adds extras and the orientation, keeps the history', async () => {
    const { options } = stepOptions([], {
      messages: [
        { role: 'system', content: 'one' },
        { role: 'system', content: 'two' },
        { role: 'user', content: 'earlier' },
        { role: 'assistant', content: 'reply' },
        { role: 'user', content: 'now' },
      ],
      systemPromptExtras: ['extra'],
      context: { orient: 'the plan', compactThreshold: 0.5 },
    });
    const state = createRunState(options);
    const setup = await prepareRun(state);
    const rendered = setup.window.render();
    expect(rendered[0]?.role).toBe('system');
    expect(rendered[0]?.content).toContain('one\n\ntwo');
    expect(rendered[0]?.content).toContain('extra');
    expect(rendered[0]?.content).toContain('== ORIENT ==\nthe plan');
    expect(rendered.slice(1).map((message) => message.content)).toEqual(['earlier', 'reply', 'now']);
    expect(setup.maxContextTokens).toBe(5_000);
    expect(setup.modelTools).toEqual([]);
    expect(setup.registry).toBeUndefined();
    expect(setup.canWriteLedger).toBe(false);
  });

  it("gives the model calls the caller's signal only when there is one (otherwise nothing can abort them)", async () => {
    const { options } = stepOptions([]);
    const unabortable = await prepareRun(createRunState(options));
    expect(unabortable.streamOptions.signal).toBeUndefined();
    const controller = new AbortController();
    const state = createRunState({ ...options, signal: controller.signal });
    const abortable = await prepareRun(state);
    expect(abortable.streamOptions.signal).toBe(controller.signal);
    controller.abort();
    expect(abortable.streamOptions.signal?.aborted).toBe(true);
  });

  it('offers only the named tools, counts their tokens, and nudges only when the ledger can be written', async () => {
    const registry = createToolRegistry([tool('ledger_append'), tool('alpha'), tool('beta')]);
    const { options } = stepOptions([], {
      tools: { registry, names: ['alpha', 'ledger_append'] },
      ledger: {} as Ledger,
    });
    const setup = await prepareRun(createRunState(options));
    expect(setup.modelTools.map((definition) => definition.name).sort()).toEqual(['alpha', 'ledger_append']);
    expect(setup.overheadTokens).toBeGreaterThan(0);
    expect(setup.canWriteLedger).toBe(true);
    const withoutLedger = await prepareRun(createRunState({ ...options, ledger: undefined }));
    expect(withoutLedger.canWriteLedger).toBe(false);
  });

  it('puts the skill catalog in the prompt and activates skills the task triggers', async () => {
    const asked: string[] = [];
    const library = {
      catalog: async () => 'SKILLS: deploy',
      autoActivate: async (text: string) => {
        asked.push(text);
        return [{ name: 'deploy', version: 1, body: 'how to deploy' }];
      },
    } as unknown as SkillLibrary;
    const { options } = stepOptions([], { skills: { library } });
    const state = createRunState(options);
    const setup = await prepareRun(state);
    expect(asked).toEqual(['Do the task.']);
    expect(state.activeSkills).toEqual(['deploy']);
    expect(setup.window.render()[0]?.content).toContain('SKILLS: deploy');
    const quiet = createRunState({ ...options, skills: { library, catalog: false, autoActivate: false } });
    await prepareRun(quiet);
    expect(quiet.activeSkills).toEqual([]);
    expect(asked).toHaveLength(1);
  });
});
