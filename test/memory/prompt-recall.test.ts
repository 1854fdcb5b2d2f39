import { expect, it } from 'vitest';
import { appendBatch } from '../../src/memory/service/ram.js';
import { recallForPrompt } from '../../src/memory/service/recall.js';
import { summarize } from '../../src/memory/service/summarize.js';
import { describeEachDatabase } from '../helpers/databases.js';
import { failingModel, sessionRef } from './memory-fixtures.js';
import { stepContext } from './service/helpers.js';

/** Memory addresses listed in a prompt block, in order. */
const addresses = (block: string) => [...block.matchAll(/^- \[([^,]+),/gm)].map((match) => match[1]);

describeEachDatabase('automatic recall ranking', (getDb) => {
  it('past the row budget ranks the rarest term that has matches, not one that matches nothing', async () => {
    const { ctx } = stepContext(getDb(), { config: { recall: { promptMaxScoredRows: 20 } } });
    await appendBatch(
      ctx,
      sessionRef('old'),
      Array.from({ length: 30 }, (_, index) => ({
        role: index % 2 ? ('assistant' as const) : ('user' as const),
        content: `hangar note ${index + 1}`,
      })),
    );
    const block = await recallForPrompt(ctx, {
      agentId: 'alpha',
      sessionKey: 'agent:alpha:main',
      query: 'zzqx hangar',
    });
    // SQLite ranks the newest matches of "hangar" (30 rows, over the budget of 20); Postgres ranks them all.
    const listed = addresses(block);
    expect(listed).toHaveLength(ctx.config.recall.searchDefaultLimit);
    expect(listed.every((address) => address?.startsWith('agent:alpha:old#'))).toBe(true);
  });

  it('recalls nothing for a prompt of stopwords alone', async () => {
    const { ctx } = stepContext(getDb());
    await appendBatch(ctx, sessionRef('old'), [
      { role: 'user', content: 'what is it about then' },
      { role: 'assistant', content: 'it is about the zeppelin' },
    ]);
    const ask = (query: string) =>
      recallForPrompt(ctx, { agentId: 'alpha', sessionKey: 'agent:alpha:main', query });
    expect(await ask('What is it about, then?')).toBe('');
    expect(addresses(await ask('what is the zeppelin about'))).toContain('agent:alpha:old#2');
  });

  it('lists the turn before a match through smoothing, but not an entry that is no conversational turn', async () => {
    const { ctx } = stepContext(getDb());
    await appendBatch(ctx, sessionRef('old'), [
      { role: 'user', content: 'can you book it for me' },
      { role: 'assistant', content: 'the zeppelin hangar is booked' },
    ]);
    await appendBatch(ctx, sessionRef('ops'), [
      { role: 'system', content: 'maintenance window opened' },
      { role: 'assistant', content: 'zeppelin moved to the hangar' },
    ]);
    const block = await recallForPrompt(ctx, {
      agentId: 'alpha',
      sessionKey: 'agent:alpha:main',
      query: 'zeppelin',
    });
    const listed = addresses(block);
    expect(listed).toEqual(expect.arrayContaining(['agent:alpha:old#2', 'agent:alpha:ops#2']));
    expect(listed).toContain('agent:alpha:old#1');
    expect(listed).not.toContain('agent:alpha:ops#1');
  });

  it('leaves out the context of the asking session, loaded or not, and keeps the rest of its key', async () => {
    const { ctx } = stepContext(getDb(), { config: { maxActiveEntries: 2, evictDownToRatio: 1 } });
    await appendBatch(ctx, sessionRef('main'), [
      { role: 'user', content: 'the zeppelin is red' },
      { role: 'assistant', content: 'noted' },
      { role: 'user', content: 'paint the zeppelin blue' },
      { role: 'assistant', content: 'the zeppelin will be blue' },
    ]);
    const ask = { agentId: 'alpha', sessionKey: 'agent:alpha:main', query: 'zeppelin' };
    // #1 and #2 (which has #1's words as the turn before it) were evicted from a context of two entries.
    const outside = ['agent:alpha:main#1', 'agent:alpha:main#2'];
    expect(addresses(await recallForPrompt(ctx, ask)).sort()).toEqual(outside);
    const { ctx: restarted } = stepContext(getDb(), { config: { maxActiveEntries: 2, evictDownToRatio: 1 } });
    expect(addresses(await recallForPrompt(restarted, ask)).sort()).toEqual(outside);
  });

  it('writes each memory on one line, its whitespace collapsed, and tells summaries from roles', async () => {
    const { ctx } = stepContext(getDb(), { model: failingModel() });
    await appendBatch(ctx, sessionRef('old'), [
      { role: 'user', content: 'the zeppelin hangar' },
      { role: 'assistant', content: 'booked for the zeppelin' },
      { role: 'user', content: '  the zeppelin\n\tis  red ' },
      { role: 'assistant', content: 'a zeppelin is a rigid airship' },
    ]);
    // An extractive summary of #1 and #2 (the model fails) takes their place as #5.
    expect((await summarize(ctx, sessionRef('old'), { maxEntries: 2 })).summary?.memoryId).toBe(5);
    const block = await recallForPrompt(ctx, {
      agentId: 'alpha',
      sessionKey: 'agent:alpha:main',
      query: 'zeppelin',
    });
    const day = String.raw`\d{4}-\d{2}-\d{2}`;
    expect(block).toMatch(new RegExp(`^- \\[agent:alpha:old#3, ${day}\\] user: the zeppelin is red$`, 'm'));
    expect(block).toMatch(
      new RegExp(`^- \\[agent:alpha:old#4, ${day}\\] assistant: a zeppelin is a rigid airship$`, 'm'),
    );
    expect(block).toMatch(new RegExp(`^- \\[agent:alpha:old#5, ${day}\\] summary: .*zeppelin`, 'm'));
  });

  it('smooths only recall.promptCandidates candidates', async () => {
    const { ctx } = stepContext(getDb(), { config: { recall: { promptCandidates: 1 } } });
    for (const key of ['a', 'b', 'c'])
      await appendBatch(ctx, sessionRef(key), [{ role: 'user', content: `zeppelin log of ${key}` }]);
    const block = await recallForPrompt(ctx, {
      agentId: 'alpha',
      sessionKey: 'agent:alpha:main',
      query: 'zeppelin',
    });
    expect(addresses(block)).toHaveLength(1);
  });
});
