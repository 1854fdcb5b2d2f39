import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { expect, it, vi } from 'vitest';
import { createLedger } from '../../src/ledger/index.js';
import {
  createSkillExperience,
  createSkillLibrary,
  createSkillTools,
  parseSkillFile,
  skillExperienceConfigSchema,
} from '../../src/skills/index.js';
import { createManualClock, createSequentialIdGenerator } from '../../src/util/index.js';
import { describeEachDatabase } from '../helpers/databases.js';
import { createFaultyDatabase } from '../helpers/faulty-database.js';
import { createToolContext, useTempDirs } from '../tools/helpers.js';

const tempDir = useTempDirs();

/** One finding, recurring in two work items: a pattern at threshold 2. */
async function recordProxyTimeouts(ledger: ReturnType<typeof createLedger>): Promise<void> {
  await ledger.append('w1', {
    entryType: 'finding',
    content: 'Timeouts happen when the proxy drops idle sockets.',
  });
  await ledger.append('w2', {
    entryType: 'finding',
    content: 'The proxy drops idle sockets, causing timeouts.',
  });
}
const day = 86_400_000;

describeEachDatabase('skills from experience', (getDb) => {
  const setup = async (config: Parameters<typeof createSkillExperience>[0]['config'] = {}, db = getDb()) => {
    const clock = createManualClock();
    const ledger = createLedger({ db, clock });
    const dir = await tempDir();
    const library = createSkillLibrary({ dirs: [dir], db, ledger, clock });
    const submitted: Array<{ title: string; description: string; params: Record<string, unknown> }> = [];
    const experience = createSkillExperience({
      db,
      ledger,
      library,
      clock,
      idGenerator: createSequentialIdGenerator(),
      config,
      proposeWork: async (work) => {
        submitted.push(work);
        return { id: `work_skill_${submitted.length}` };
      },
    });
    return { db, clock, ledger, library, experience, submitted, dir };
  };

  it('proposes once the threshold of distinct work items is reached; the threshold is configurable', async () => {
    const { ledger, experience, clock } = await setup({ threshold: 2 });
    await ledger.append('w1', { entryType: 'finding', content: 'Builds fail when the npm cache is stale.' });
    // The same item twice does not make a pattern recur.
    await ledger.append('w1', { entryType: 'finding', content: 'A stale npm cache fails the builds.' });
    // Decisions and notes are not findings.
    await ledger.append('w2', { entryType: 'decision', content: 'Builds fail when the npm cache is stale.' });
    expect(await experience.scan()).toEqual([]);
    clock.advance(1_000);
    await ledger.append('w3', {
      entryType: 'finding',
      content: 'The builds fail if the npm cache went stale.',
    });
    const [proposal] = await experience.scan();
    expect(proposal).toMatchObject({ mode: 'draft', status: 'draft' });
    expect(proposal!.sources.map((source) => [source.workItemId, source.seq])).toEqual([
      ['w1', 1],
      ['w1', 2],
      ['w3', 1],
    ]);
    expect(proposal!.triggers).toEqual(expect.arrayContaining(['npm', 'cache', 'stale']));
    expect(await experience.scan()).toEqual([]);
    expect(await experience.get(proposal!.skillName)).toMatchObject({ id: proposal!.id });
  });

  it('keeps unrelated findings apart and ignores findings older than the lookback', async () => {
    const { ledger, experience, clock } = await setup({ threshold: 2, lookbackMs: 7 * day });
    await ledger.append('old', { entryType: 'finding', content: 'Deploys need the VPN to be connected.' });
    clock.advance(10 * day);
    await ledger.append('a', {
      entryType: 'finding',
      content: 'Deploys need the VPN to be connected first.',
    });
    await ledger.append('b', {
      entryType: 'finding',
      content: 'The invoice template misses the tax number.',
    });
    expect(await experience.scan()).toEqual([]);
    expect(skillExperienceConfigSchema.parse({})).toMatchObject({
      threshold: 3,
      similarity: 0.5,
      mode: 'draft',
    });
  });

  it('approving writes the skill with every source finding as provenance; rejecting keeps it from coming back', async () => {
    const { ledger, experience, library, dir } = await setup({ threshold: 2 });
    await recordProxyTimeouts(ledger);
    await ledger.append('w3', { entryType: 'finding', content: 'Fonts render wrong in the PDF export.' });
    await ledger.append('w4', { entryType: 'finding', content: 'The PDF export renders fonts wrong.' });
    const proposals = await experience.scan();
    expect(proposals).toHaveLength(2);
    const { skill } = await experience.approve(proposals[0]!.id);
    const file = parseSkillFile(await readFile(path.join(dir, skill.name, 'SKILL.md'), 'utf8'));
    expect(file.ok && file.frontmatter.created_from).toBe(`pattern:${proposals[0]!.patternKey}`);
    const provenance = await library.provenance(skill.name);
    expect(
      provenance.filter((record) => record.sourceType === 'ledger_entry').map((record) => record.workItemId),
    ).toEqual(['w1', 'w2']);
    expect((await library.recentlyUpdated({ sinceMs: 0 }))[0]).toMatchObject({
      name: skill.name,
      workItems: 2,
    });
    const rejected = await experience.reject(proposals[1]!.id);
    expect(rejected.status).toBe('rejected');
    await expect(experience.reject(proposals[1]!.id)).rejects.toMatchObject({ code: 'CONFLICT' });
    await ledger.append('w5', {
      entryType: 'finding',
      content: 'Fonts render wrong in the PDF export again.',
    });
    expect(await experience.scan()).toEqual([]);
  });

  it('an approval the disk refuses publishes nothing: no SKILL.md, no provenance, the proposal still a draft', async () => {
    const faulty = createFaultyDatabase(getDb());
    const { ledger, library, experience, dir } = await setup({ threshold: 2 }, faulty);
    await recordProxyTimeouts(ledger);
    const [proposal] = await experience.scan();

    faulty.failWrites();
    await expect(experience.approve(proposal!.id)).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
    faulty.heal();
    expect(await readdir(dir)).toEqual([]);
    expect((await library.list()).map((skill) => skill.name)).not.toContain(proposal!.skillName);
    expect(await library.provenance(proposal!.skillName)).toEqual([]);
    expect(await experience.get(proposal!.id)).toMatchObject({ status: 'draft' });

    // Approved again once the disk is back: version 1, as if the refusal had never happened.
    const { skill, proposal: approved } = await experience.approve(proposal!.id);
    expect(skill.version).toBe(1);
    expect(approved).toMatchObject({ status: 'approved', skillVersion: 1 });
    expect(await readdir(path.join(dir, skill.name))).toEqual(['SKILL.md']);
    await expect(experience.approve(proposal!.id)).rejects.toMatchObject({ code: 'CONFLICT' });
  });

  it('work mode asks an agent; its create_skill records the pattern as provenance', async () => {
    const { ledger, experience, library, submitted } = await setup({ threshold: 2, mode: 'work' });
    await ledger.append('w1', {
      entryType: 'finding',
      content: 'Retries double-charge cards without idempotency keys.',
    });
    await ledger.append('w2', {
      entryType: 'finding',
      content: 'Without idempotency keys, retries double-charge cards.',
    });
    const [proposal] = await experience.scan();
    expect(proposal).toMatchObject({ mode: 'work', status: 'submitted', workItemId: 'work_skill_1' });
    expect(submitted[0]!.description).toContain(`suggested name "${proposal!.skillName}"`);
    expect(submitted[0]!.params).toEqual({ skillProposalId: proposal!.id });
    await expect(experience.approve(proposal!.id)).rejects.toMatchObject({ code: 'CONFLICT' });

    const create = createSkillTools({ library, ledger, experience }).find(
      (tool) => tool.name === 'create_skill',
    )!;
    const context = createToolContext(await tempDir(), { workItemId: 'work_skill_1' });
    await create.execute(
      create.input.parse({
        name: 'idempotent-retries',
        description: 'Retry payments safely',
        content: 'Use keys.',
      }),
      context,
    );
    const records = await library.provenance('idempotent-retries');
    expect(records.filter((record) => record.sourceType === 'ledger_entry').map((r) => r.workItemId)).toEqual(
      ['w1', 'w2'],
    );
    expect((await experience.get(proposal!.id))!).toMatchObject({ status: 'created', skillVersion: 1 });
  });

  it('completions arriving fast share one scan per scanIntervalMs', async () => {
    const { ledger, library, db } = await setup();
    const clock = createManualClock();
    let reads = 0;
    const counting = {
      listRecentFindings: (options: { sinceMs: number; limit: number }) => {
        reads++;
        return ledger.listRecentFindings(options);
      },
    };
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const experience = createSkillExperience({
        db,
        ledger: counting,
        library,
        clock,
        config: { scanIntervalMs: 10_000 },
      });
      experience.scheduleScan();
      await experience.idle();
      expect(reads).toBe(1);
      for (let index = 0; index < 5; index++) experience.scheduleScan();
      await experience.idle();
      expect(reads).toBe(1);
      clock.advance(10_000);
      await vi.advanceTimersByTimeAsync(10_000);
      await experience.idle();
      expect(reads).toBe(2);
      experience.scheduleScan();
      experience.stop();
      clock.advance(20_000);
      await vi.advanceTimersByTimeAsync(20_000);
      expect(reads).toBe(2);
    } finally {
      vi.useRealTimers();
    }
  });
});
