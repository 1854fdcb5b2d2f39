import { expect, it, vi } from 'vitest';
import { createHashingEmbedder } from '../../../src/memory/index.js';
import { appendBatch, evictEntries, pickOldest, withSession } from '../../../src/memory/service/ram.js';
import {
  getEntry,
  history,
  query,
  recall,
  recallForPrompt,
  search,
} from '../../../src/memory/service/recall.js';
import { enterDegraded } from '../../../src/memory/service/write-retry.js';
import { describeEachDatabase } from '../../helpers/databases.js';
import { sessionRef } from '../memory-fixtures.js';
import { breakableDatabase, stepContext } from './helpers.js';

describeEachDatabase('memory recall', (getDb) => {
  const seed = async (ctx: Parameters<typeof appendBatch>[0]) => {
    await appendBatch(ctx, sessionRef('old'), [
      { role: 'user', content: 'the invoice for the zeppelin hangar is overdue' },
      { role: 'assistant', content: 'noted, I will remind you about the hangar' },
    ]);
    await appendBatch(ctx, sessionRef('main'), [
      { role: 'user', content: 'what is the weather like' },
      { role: 'assistant', content: 'sunny' },
    ]);
  };

  it('finds entries by full-text search and leaves out excluded addresses', async () => {
    const { ctx } = stepContext(getDb());
    await seed(ctx);
    const hits = await search(ctx, { agentId: 'alpha', query: 'zeppelin hangar' });
    expect(hits.map((hit) => hit.address)).toEqual(['agent:alpha:old#1', 'agent:alpha:old#2']);
    expect(hits[0]).toMatchObject({ mode: 'fts', source: 'ram', role: 'user' });
    const rest = await search(ctx, {
      agentId: 'alpha',
      query: 'hangar',
      excludeAddresses: new Set(['agent:alpha:old#1']),
    });
    expect(rest.map((hit) => hit.address)).toEqual(['agent:alpha:old#2']);
    expect(await search(ctx, { agentId: 'beta', query: 'hangar' })).toEqual([]);
    await expect(search(ctx, { agentId: 'alpha', query: 'x', mode: 'hybrid' })).rejects.toMatchObject({
      code: 'INVALID_REQUEST',
    });
  });

  it('widens past excluded entries without asking the full-text index again', async () => {
    const { ctx } = stepContext(getDb());
    await appendBatch(
      ctx,
      sessionRef('old'),
      Array.from({ length: 30 }, (_, index) => ({
        role: index % 2 === 0 ? ('user' as const) : ('assistant' as const),
        content: `hangar note ${index + 1}`,
      })),
    );
    const all = await search(ctx, { agentId: 'alpha', query: 'hangar', limit: 30 });
    const fullText = vi.spyOn(ctx.ltm, 'fullText');
    const hits = await search(ctx, {
      agentId: 'alpha',
      query: 'hangar',
      limit: 2,
      excludeAddresses: new Set(all.slice(0, 10).map((hit) => hit.address)),
    });
    expect(hits.map((hit) => hit.address)).toEqual(all.slice(10, 12).map((hit) => hit.address));
    // The first pass (4 entries, all excluded) and the wider one (16) share one ranking.
    expect(fullText).toHaveBeenCalledTimes(1);
  });

  it('fuses vector and keyword ranks in hybrid mode', async () => {
    const { ctx } = stepContext(getDb(), { embedder: createHashingEmbedder({ dimensions: 64 }) });
    await seed(ctx);
    while (ctx.embeddings.draining) await ctx.embeddings.draining;
    const hits = await search(ctx, { agentId: 'alpha', query: 'zeppelin invoice' });
    expect(hits[0]).toMatchObject({ address: 'agent:alpha:old#1', mode: 'hybrid' });
  });

  it('recalls active entries, replaced ones only with includeFull, and queries by id and topic', async () => {
    const { ctx } = stepContext(getDb());
    await seed(ctx);
    await withSession(ctx, sessionRef('old'), async (ram) =>
      evictEntries(
        ctx,
        ram,
        pickOldest(ram, (count) => count < 1, 1),
        'test',
      ),
    );
    const active = await recall(ctx, { agentId: 'alpha', sessionKey: 'agent:alpha:old' });
    expect(active.map((item) => item.address)).toEqual(['agent:alpha:old#2']);
    const full = await recall(ctx, { agentId: 'alpha', sessionKey: 'agent:alpha:old', includeFull: true });
    expect(full.map((item) => item.address)).toContain('agent:alpha:old#1');
    const byId = await query(ctx, {
      agentId: 'alpha',
      memoryIds: ['agent:alpha:main#2', 'agent:alpha:old#1'],
    });
    expect(byId.map((item) => item.address).sort()).toEqual(['agent:alpha:main#2', 'agent:alpha:old#1']);
    const byTopic = await query(ctx, { agentId: 'alpha', topic: 'weather' });
    expect(byTopic.map((item) => item.address)).toEqual(['agent:alpha:main#1']);
    await expect(query(ctx, { agentId: 'alpha', memoryIds: [1] })).rejects.toMatchObject({
      code: 'INVALID_REQUEST',
    });
    await expect(query(ctx, { agentId: 'alpha', memoryIds: ['nonsense'] })).rejects.toMatchObject({
      code: 'INVALID_REQUEST',
    });
    expect((await getEntry(ctx, 'agent:alpha:main#2'))?.content).toBe('sunny');
    expect(await getEntry(ctx, 'not an address')).toBeUndefined();
  });

  it('builds a prompt block of other sessions’ memories within its token budget', async () => {
    const { ctx } = stepContext(getDb());
    await seed(ctx);
    const block = await recallForPrompt(ctx, {
      agentId: 'alpha',
      sessionKey: 'agent:alpha:main',
      query: 'hangar invoice',
    });
    expect(block.split('\n')[0]).toBe('Relevant memories from earlier conversations (may be outdated):');
    expect(block).toContain('[agent:alpha:old#1, ');
    expect(block).not.toContain('agent:alpha:main#');
    expect(
      await recallForPrompt(ctx, { agentId: 'alpha', sessionKey: 'agent:alpha:main', query: '  ' }),
    ).toBe('');
    expect(
      await recallForPrompt(ctx, {
        agentId: 'alpha',
        sessionKey: 'agent:alpha:main',
        query: 'hangar',
        maxTokens: 5,
      }),
    ).toBe('');
    // After a restart nothing is in RAM: the session's active entries are read from the store and left out.
    const { ctx: restarted } = stepContext(getDb());
    expect(
      await recallForPrompt(restarted, {
        agentId: 'alpha',
        sessionKey: 'agent:alpha:main',
        query: 'weather',
      }),
    ).toBe('');
    expect(
      await recallForPrompt(restarted, { agentId: 'alpha', sessionKey: 'agent:alpha:old', query: 'weather' }),
    ).toContain('[agent:alpha:main#1, ');
  });

  it('answers from RAM while the database cannot be read, history included', async () => {
    const db = breakableDatabase(getDb());
    const { ctx } = stepContext(db);
    await seed(ctx);
    db.broken = true;
    enterDegraded(ctx, new Error('disk I/O error'));
    await appendBatch(ctx, sessionRef('main'), [{ role: 'user', content: 'hangar again' }]);
    const hits = await search(ctx, { agentId: 'alpha', query: 'hangar' });
    expect(hits.map((hit) => hit.address)).toEqual([
      'agent:alpha:main#3',
      'agent:alpha:old#2',
      'agent:alpha:old#1',
    ]);
    const lines = await history(ctx, 'agent:alpha:main');
    expect(lines.map((line) => line.content)).toEqual(['what is the weather like', 'sunny', 'hangar again']);
    expect((await recall(ctx, { agentId: 'alpha', sessionKey: 'agent:alpha:old' })).length).toBe(2);
  });
});
