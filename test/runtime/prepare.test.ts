import { afterEach, describe, expect, it, vi } from 'vitest';
import { createRuntime, loadConfig, type Runtime } from '../../src/index.js';
import type { LanguageModel } from '../../src/model/index.js';
import { createScriptedModel } from '../../src/testing.js';
import { type CapturedLog, captureLog, tempHome } from './helpers.js';

/** A scripted model answering one turn, with the `prepare` a provider that loads an SDK has. */
function preparingModel(prepare: () => Promise<void>) {
  return Object.assign(createScriptedModel({ steps: [{ text: 'Hi there.' }] }), {
    prepare: vi.fn(prepare),
  });
}

async function runtimeIn(
  home: string,
  model: LanguageModel,
  log: CapturedLog = captureLog(),
): Promise<Runtime> {
  const env = { AGENTD_HOME: home };
  return createRuntime({
    config: loadConfig({ cwd: home, env }),
    env,
    model,
    logDestination: log.stream,
  });
}

describe("a runtime's prepare()", () => {
  const open: Runtime[] = [];
  afterEach(async () => {
    for (const runtime of open.splice(0)) await runtime.close();
  });

  it("lists the skills, makes the tools' definitions and prepares the model once, before any turn", async () => {
    const model = preparingModel(async () => {});
    const runtime = await runtimeIn(tempHome(), model);
    open.push(runtime);
    const toModelTools = vi.spyOn(runtime.tools, 'toModelTools');
    // Making the runtime read no skill: the example skill's front matter is kept at its first discovery.
    expect(await runtime.store.kv.list('skills.frontmatter')).toEqual([]);

    const first = runtime.prepare();
    expect(runtime.prepare()).toBe(first);
    await first;
    await runtime.prepare();

    expect(model.prepare).toHaveBeenCalledTimes(1);
    expect(toModelTools).toHaveBeenCalled();
    expect(await runtime.store.kv.list('skills.frontmatter')).toHaveLength(1);
    expect(model.requests).toHaveLength(0);
    const reply = await runtime.sendMessage({ text: 'hello' });
    expect(reply).toMatchObject({ status: 'completed', text: 'Hi there.' });
  });

  it('logs the part that failed, resolves, and leaves the failure to the turn that meets it', async () => {
    const log = captureLog();
    const model = preparingModel(async () => {
      throw new Error('the SDK is not installed');
    });
    const runtime = await runtimeIn(tempHome(), model, log);
    open.push(runtime);

    await expect(runtime.prepare()).resolves.toBeUndefined();

    const warning = log
      .text()
      .split('\n')
      .find((line) => line.includes('preparing the first chat turn failed'));
    expect(warning).toBeDefined();
    expect(JSON.parse(warning!)).toMatchObject({
      part: 'model',
      err: { message: 'the SDK is not installed' },
    });
    // The skills and the tools were prepared all the same; the scripted model still answers.
    expect(await runtime.store.kv.list('skills.frontmatter')).toHaveLength(1);
    expect(await runtime.sendMessage({ text: 'hello' })).toMatchObject({ status: 'completed' });
  });

  it('does nothing once the runtime is closed', async () => {
    const log = captureLog();
    const model = preparingModel(async () => {});
    const runtime = await runtimeIn(tempHome(), model, log);
    await runtime.close();
    await expect(runtime.prepare()).resolves.toBeUndefined();
    expect(model.prepare).not.toHaveBeenCalled();
    expect(log.text()).not.toContain('failed');
  });

  it('resolves a close called while another runs only once the store is closed', async () => {
    const runtime = await runtimeIn(
      tempHome(),
      preparingModel(() => new Promise((resolve) => setTimeout(resolve, 150))),
    );
    // The first close waits for the slow preparation; the second must wait for the same close.
    void runtime.prepare();
    const first = runtime.close();
    await runtime.close();
    await expect(runtime.store.db.get('SELECT 1 AS one')).rejects.toThrow();
    await first;
  });

  it("closes after the preparation's writes, not in the middle of them", async () => {
    const home = tempHome();
    const log = captureLog();
    const closing = await runtimeIn(
      home,
      preparingModel(async () => {}),
      log,
    );
    void closing.prepare();
    await closing.close();
    expect(log.text()).not.toContain('failed');

    // The discovery's kept front matter reached the store before it closed.
    const reopened = await runtimeIn(
      home,
      preparingModel(async () => {}),
    );
    open.push(reopened);
    expect(await reopened.store.kv.list('skills.frontmatter')).toHaveLength(1);
  });
});
