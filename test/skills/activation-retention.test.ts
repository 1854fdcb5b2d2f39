import { writeFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import {
  createSkillActivationRetention,
  createSkillLibrary,
  type SkillLibrary,
  skillsConfigSchema,
} from '../../src/skills/index.js';
import { createStore, type SqlDatabase, type SqlValue, sqlValueRows } from '../../src/store/index.js';
import { createManualClock, createRecordingLogger, ErrorCodes } from '../../src/util/index.js';
import { describeEachDatabase } from '../helpers/databases.js';
import { createFaultyDatabase } from '../helpers/faulty-database.js';
import {
  dayMs,
  deletes,
  eventually,
  homeWithConfig,
  planOf,
  recording,
  useRuntimeHomes,
} from '../helpers/retention.js';
import { useTempDirs } from '../tools/helpers.js';

const now = 1_700_000_000_000 + 400 * dayMs;
const retainMs = 30 * dayMs;

const tempDir = useTempDirs();

/** Records an activation of `skill` for each of `agesInDays`, oldest first, as `activate` would. */
async function activatedAgo(db: SqlDatabase, skill: string, agesInDays: number[]): Promise<void> {
  const params: SqlValue[] = [];
  for (const days of [...agesInDays].sort((left, right) => right - left))
    params.push(skill, 1, 'auto', `run ${skill} ${days}`, now - days * dayMs);
  await db.run(
    `INSERT INTO skill_activations (skill_name, skill_version, activation_type, run_id, activated_at) VALUES ${sqlValueRows(agesInDays.length, 5)}`,
    params,
  );
}

/** The ages in days of the skill's recorded activations, oldest first. */
const agesOf = async (db: SqlDatabase, skill: string) =>
  (
    await db.all<{ activated_at: number }>(
      'SELECT activated_at FROM skill_activations WHERE skill_name = ? ORDER BY activated_at, id',
      [skill],
    )
  ).map((row) => (now - Number(row.activated_at)) / dayMs);

/** A library of the skills named, on disk. */
async function libraryOf(
  db: SqlDatabase,
  names: string[],
  clock = createManualClock(now),
): Promise<SkillLibrary> {
  const dir = await tempDir();
  for (const name of names) {
    await mkdir(path.join(dir, name), { recursive: true });
    await writeFile(
      path.join(dir, name, 'SKILL.md'),
      `---\nname: ${name}\ndescription: Does ${name} things.\n---\n\nInstructions.\n`,
    );
  }
  return createSkillLibrary({ dirs: [dir], db, clock });
}

const prunedLine = 'pruned the skill activations';
const refusedLine = 'could not prune the skill activations; trying again at the next prune';

describeEachDatabase('skill activation retention', (getDb) => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("deletes activations older than the cutoff but each skill's newest, and the stale list reads the same", async () => {
    const db = getDb();
    await activatedAgo(db, 'mixed', [90, 45, 31, 29, 1]);
    await activatedAgo(db, 'forgotten', [200, 120, 60, 60]);
    await activatedAgo(db, 'once', [300]);
    await activatedAgo(db, 'recent', [20, 10, 0]);
    const library = await libraryOf(db, ['mixed', 'forgotten', 'once', 'recent', 'never']);
    const staleAt = async (olderThanDays: number) =>
      (await library.staleSkills({ olderThanDays })).map(({ name, lastActivatedAt }) => ({
        name,
        lastActivatedAt,
      }));
    const before = await Promise.all([1, 30, 100, 250, 1_000].map(staleAt));
    expect(before[1]!.map((entry) => entry.name)).toEqual(['forgotten', 'once']);

    const clock = createManualClock(now);
    const retention = createSkillActivationRetention({ db, retainMs, clock });
    expect(await retention.prune()).toBe(3 + 2);
    expect(await agesOf(db, 'mixed')).toEqual([29, 1]);
    // Its last activation, and the other one of that same instant.
    expect(await agesOf(db, 'forgotten')).toEqual([60, 60]);
    expect(await agesOf(db, 'once')).toEqual([300]);
    expect(await agesOf(db, 'recent')).toEqual([20, 10, 0]);
    expect(await Promise.all([1, 30, 100, 250, 1_000].map(staleAt))).toEqual(before);

    // A year later every skill is down to its last activation, and still reads as used then.
    clock.set(now + 365 * dayMs);
    expect(await retention.prune()).toBe(1 + 2);
    expect(await agesOf(db, 'mixed')).toEqual([1]);
    expect(await agesOf(db, 'recent')).toEqual([0]);
    expect(await Promise.all([1, 30, 100, 250, 1_000].map(staleAt))).toEqual(before);
    expect(await retention.prune()).toBe(0);
  });

  it('keeps the newest activation that activate recorded', async () => {
    const db = getDb();
    const clock = createManualClock(now - 100 * dayMs);
    const library = await libraryOf(db, ['tool'], clock);
    await library.activate('tool');
    clock.set(now - 50 * dayMs);
    await library.activate('tool', { activationType: 'auto', runId: 'run-2' });
    clock.set(now);

    expect(await createSkillActivationRetention({ db, retainMs, clock }).prune()).toBe(1);
    const kept = await db.all<{ activation_type: string; run_id: string; activated_at: number }>(
      'SELECT activation_type, run_id, activated_at FROM skill_activations',
    );
    expect(kept.map((row) => ({ ...row, activated_at: Number(row.activated_at) }))).toEqual([
      { activation_type: 'auto', run_id: 'run-2', activated_at: now - 50 * dayMs },
    ]);
    expect(await library.staleSkills({ olderThanDays: 30 })).toEqual([
      { name: 'tool', lastActivatedAt: now - 50 * dayMs, lastUsedAt: now - 50 * dayMs },
    ]);
  });

  it('deletes batchRows rows a statement, oldest first, by index range, until every old row is gone', async () => {
    const { db, statements } = recording(getDb());
    await activatedAgo(getDb(), 'busy', [...Array.from({ length: 10 }, (_, index) => 40 + index), 5]);
    await activatedAgo(getDb(), 'quiet', [70, 60]);
    const retention = createSkillActivationRetention({
      db,
      retainMs,
      batchRows: 3,
      clock: createManualClock(now),
    });

    expect(await retention.prune()).toBe(10 + 1);
    expect(await agesOf(getDb(), 'busy')).toEqual([5]);
    expect(await agesOf(getDb(), 'quiet')).toEqual([60]);
    // 3 + 3 + 3 + 1 for busy, each batch up to its third row's instant; 1 for quiet, up to its last activation.
    const batches = statements.filter((statement) =>
      statement.sql.startsWith('DELETE FROM skill_activations '),
    );
    expect(batches.map((batch) => batch.params)).toEqual([
      ['busy', now - 47 * dayMs + 1],
      ['busy', now - 44 * dayMs + 1],
      ['busy', now - 41 * dayMs + 1],
      ['busy', now - 30 * dayMs],
      ['quiet', now - 60 * dayMs],
    ]);
  });

  it('with nothing to prune deletes nothing, and every statement goes through the index by skill', async () => {
    const { db, statements } = recording(getDb());
    await activatedAgo(getDb(), 'fresh', [3, 2, 1]);
    await activatedAgo(getDb(), 'old', [90]);
    const clock = createManualClock(now);
    expect(await createSkillActivationRetention({ db, retainMs, clock }).prune()).toBe(0);
    expect(deletes(statements)).toEqual([]);
    // One seek per skill and one past the last; a look at the newest only of the skill with an old row.
    expect(statements).toHaveLength(3 + 1);

    await activatedAgo(getDb(), 'old', [80]);
    await createSkillActivationRetention({ db, retainMs, clock }).prune();
    const shapes = new Map(statements.map((statement) => [statement.sql, statement]));
    expect(shapes.size).toBe(4);
    for (const statement of shapes.values()) {
      const plan = await planOf(getDb(), statement);
      if (getDb().dialect === 'sqlite') {
        expect(plan).toMatch(/USING (COVERING )?INDEX skill_activations_by_skill/);
        expect(plan).not.toMatch(/(^|\| )SCAN /);
      } else {
        expect(plan).toMatch(/Index (Only )?Scan (Backward )?(using|on) skill_activations_by_skill/);
        expect(plan).not.toMatch(/Seq Scan/);
      }
    }
  });

  it('prunes at start and every intervalMs, and stops', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const db = getDb();
    const clock = createManualClock(now);
    const logger = createRecordingLogger();
    await activatedAgo(db, 'tool', [40, 35, 1]);
    const retention = createSkillActivationRetention({ db, retainMs, intervalMs: 60_000, clock, logger });
    retention.start();
    retention.start();
    await eventually(() => expect(logger.records.map((record) => record.message)).toEqual([prunedLine]));
    expect(logger.records[0]).toMatchObject({
      level: 'info',
      object: { component: 'skills', deleted: 2, retainMs },
    });
    expect(await agesOf(db, 'tool')).toEqual([1]);

    await activatedAgo(db, 'tool', [0]);
    clock.set(now + 30 * dayMs);
    await vi.advanceTimersByTimeAsync(59_999);
    expect(await agesOf(db, 'tool')).toEqual([1, 0]);
    await vi.advanceTimersByTimeAsync(1);
    await eventually(() => expect(logger.records).toHaveLength(2));
    expect(logger.records[1]!.object).toMatchObject({ deleted: 1 });
    expect(await agesOf(db, 'tool')).toEqual([0]);

    await retention.stop();
    clock.set(now + 90 * dayMs);
    await activatedAgo(db, 'tool', [-31]);
    await vi.advanceTimersByTimeAsync(10 * 60_000);
    expect(await agesOf(db, 'tool')).toEqual([0, -31]);
    expect(logger.records).toHaveLength(2);
  });

  it('logs a prune the database refused, and prunes at the next interval', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const faulty = createFaultyDatabase(getDb());
    const clock = createManualClock(now);
    const logger = createRecordingLogger();
    await activatedAgo(getDb(), 'tool', [40, 1]);
    const retention = createSkillActivationRetention({
      db: faulty,
      retainMs,
      intervalMs: 60_000,
      clock,
      logger,
    });

    faulty.failWrites();
    retention.start();
    await eventually(() => expect(logger.records).toHaveLength(1));
    expect(logger.records[0]).toMatchObject({ level: 'warn', message: refusedLine });
    expect(logger.records[0]!.object.err).toMatchObject({ code: ErrorCodes.storeUnavailable });
    expect(await agesOf(getDb(), 'tool')).toEqual([40, 1]);

    faulty.heal();
    await vi.advanceTimersByTimeAsync(60_000);
    await eventually(() => expect(logger.records).toHaveLength(2));
    expect(logger.records[1]).toMatchObject({ level: 'info', message: prunedLine, object: { deleted: 1 } });
    expect(await agesOf(getDb(), 'tool')).toEqual([1]);
    await retention.stop();
  });

  it('keeps every activation, and reads none, with retainMs 0', async () => {
    const { db, statements } = recording(getDb());
    await activatedAgo(getDb(), 'tool', [400, 40]);
    const retention = createSkillActivationRetention({ db, retainMs: 0, clock: createManualClock(now) });
    retention.start();
    expect(await retention.prune()).toBe(0);
    await retention.stop();
    expect(statements).toEqual([]);
    expect(await agesOf(getDb(), 'tool')).toEqual([400, 40]);
  });
});

describe('the retention option of the skills section', () => {
  it('keeps 30 days by default, 0 for ever, fractions, and refuses negative days', () => {
    expect(skillsConfigSchema.parse({}).retainActivationsDays).toBe(30);
    expect(skillsConfigSchema.parse(undefined).retainActivationsDays).toBe(30);
    expect(skillsConfigSchema.parse({ retainActivationsDays: 0 }).retainActivationsDays).toBe(0);
    expect(skillsConfigSchema.parse({ retainActivationsDays: 0.5 }).retainActivationsDays).toBe(0.5);
    expect(skillsConfigSchema.safeParse({ retainActivationsDays: -1 }).success).toBe(false);
  });
});

describe('the skills section of agentd.yaml', () => {
  const { homes, openIn } = useRuntimeHomes();

  it("prunes the runtime's activations to the days it names, and the stale list reads the same", async () => {
    const home = homeWithConfig('agentd-skill-retention-', 'skills:\n  retainActivationsDays: 7\n');
    homes.push(home);
    await mkdir(path.join(home, 'workspace', 'skills', 'tide-pools'), { recursive: true });
    writeFileSync(
      path.join(home, 'workspace', 'skills', 'tide-pools', 'SKILL.md'),
      '---\nname: tide-pools\ndescription: Notes on tide pools.\n---\n\nInstructions.\n',
    );
    const startedAt = Date.now();
    const store = await createStore({ stateDir: home });
    const params: SqlValue[] = [];
    const seeded: Array<[string, number]> = [
      ['tide-pools', 20],
      ['tide-pools', 10],
      ['tide-pools', 1],
      ['code-review', 50],
      ['code-review', 40],
    ];
    for (const [skill, days] of seeded) params.push(skill, 1, 'auto', startedAt - days * dayMs);
    await store.db.run(
      `INSERT INTO skill_activations (skill_name, skill_version, activation_type, activated_at) VALUES ${sqlValueRows(seeded.length, 4)}`,
      params,
    );
    await store.close();

    const env = { AGENTD_HOME: home };
    const config = loadConfig({ cwd: home, env });
    expect(skillsConfigSchema.parse(config.sections.skills).retainActivationsDays).toBe(7);
    const runtime = await openIn(home);
    const stale = () => runtime.skills.staleSkills({ olderThanDays: 5 });
    const before = await stale();
    expect(before.map((entry) => entry.name)).toEqual(['code-review']);

    await runtime.startBackground();
    const daysAgo = (name: string) =>
      runtime.store.db
        .all<{ activated_at: number }>(
          'SELECT activated_at FROM skill_activations WHERE skill_name = ? ORDER BY activated_at',
          [name],
        )
        .then((rows) => rows.map((row) => Math.round((startedAt - Number(row.activated_at)) / dayMs)));
    await vi.waitFor(async () => {
      expect(await daysAgo('tide-pools')).toEqual([1]);
      expect(await daysAgo('code-review')).toEqual([40]);
    });
    expect(await stale()).toEqual(before);
  });
});
