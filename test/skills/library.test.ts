import { execFileSync } from 'node:child_process';
import { mkdir, readFile, symlink, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { type BusEvent, createBus } from '../../src/bus/index.js';
import { createLedger } from '../../src/ledger/index.js';
import { createSkillLibrary, createSkillTools, parseSkillFile } from '../../src/skills/index.js';
import { maxSkillFileBytes } from '../../src/skills/skill-file.js';
import { createKvStore } from '../../src/store/index.js';
import { AgentdError, createManualClock, createRecordingLogger } from '../../src/util/index.js';
import { describeEachDatabase } from '../helpers/databases.js';
import { createToolContext, useTempDirs } from '../tools/helpers.js';

const tempDir = useTempDirs();
const defaultSkillsDir = path.resolve(
  path.dirname(fileURLToPath(import.meta.url)),
  '../../defaults/workspace/skills',
);

async function writeSkill(root: string, folder: string, text: string) {
  await mkdir(path.join(root, folder), { recursive: true });
  await writeFile(path.join(root, folder, 'SKILL.md'), text);
}

const skill = (name: string, extra = '', body = `Instructions for ${name}.`) =>
  `---\nname: ${name}\ndescription: Does ${name} things.\n${extra}---\n\n${body}\n`;

describe('SKILL.md parsing', () => {
  it('accepts the Agent Skills and seed 002 fields, keeps unknown keys', () => {
    const parsed = parseSkillFile(
      '---\nname: pdf-tools\ndescription: Work with PDFs.\nlicense: MIT\nallowed-tools: read_file bash\nmetadata: { author: me }\n' +
        'triggers: [pdf, invoice]\nauto_activate: true\nversion: 3\ncreated_by: human\nuser-invocable: false\n---\n# Body\ntext\n',
    );
    expect(parsed).toMatchObject({
      ok: true,
      body: '# Body\ntext',
      frontmatter: {
        name: 'pdf-tools',
        'allowed-tools': ['read_file', 'bash'],
        triggers: { keywords: ['pdf', 'invoice'] },
        version: 3,
        'user-invocable': false,
      },
    });
  });

  it.each([
    ['no frontmatter', '# just markdown', /must start with/],
    ['unclosed', '---\nname: x\n', /not closed/],
    ['bad yaml', '---\nname: [x\n---\n', /not valid YAML/],
    ['no description', '---\nname: x\n---\n', /description/],
    ['upper case name', '---\nname: Bad_Name\ndescription: d\n---\n', /invalid name/],
    ['double hyphen', '---\nname: a--b\ndescription: d\n---\n', /invalid name/],
    ['too long', `---\nname: ${'a'.repeat(65)}\ndescription: d\n---\n`, /1–64/],
  ])('rejects %s', (_label, text, reason) => {
    const parsed = parseSkillFile(text);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.reason).toMatch(reason);
  });

  it('the example skill shipped in the default workspace is valid', async () => {
    const parsed = parseSkillFile(
      await readFile(path.join(defaultSkillsDir, 'code-review', 'SKILL.md'), 'utf8'),
    );
    expect(parsed).toMatchObject({ ok: true, frontmatter: { name: 'code-review', auto_activate: true } });
  });
});

describeEachDatabase('skill library', (getDb) => {
  it('discovers skills, reports malformed ones without crashing, honours folder precedence', async () => {
    const workspace = await tempDir();
    const shared = await tempDir();
    await writeSkill(workspace, 'alpha', skill('alpha'));
    await writeSkill(workspace, 'broken-yaml', '---\nname: [oops\n---\n');
    await writeSkill(workspace, 'wrong-folder', skill('other-name'));
    await writeSkill(workspace, 'Bad', skill('Bad'));
    await writeFile(path.join(workspace, 'stray.md'), 'not a skill folder');
    await writeSkill(shared, 'alpha', skill('alpha', 'version: 9\n'));
    await writeSkill(shared, 'beta', skill('beta'));
    const logger = createRecordingLogger();
    const bus = createBus();
    const invalid: BusEvent[] = [];
    bus.on('skill:invalid', (event) => invalid.push(event));
    const library = createSkillLibrary({
      dirs: [workspace, shared, path.join(workspace, 'missing')],
      db: getDb(),
      logger,
      bus,
    });
    const skills = await library.list();
    expect(skills.map((entry) => [entry.name, entry.version, entry.dir])).toEqual([
      ['alpha', 1, path.join(workspace, 'alpha')],
      ['beta', 1, path.join(shared, 'beta')],
    ]);
    const problems = await library.problems();
    expect(problems.map((problem) => path.basename(path.dirname(problem.path)))).toEqual([
      'Bad',
      'broken-yaml',
      'wrong-folder',
    ]);
    expect(problems[2]!.reason).toBe('name "other-name" does not match its folder "wrong-folder"');
    expect(invalid).toHaveLength(3);
    expect(logger.records.filter((record) => record.level === 'warn')).toHaveLength(3);
  });

  it('catalog lists names and descriptions only, escaped and within budget', async () => {
    const workspace = await tempDir();
    await writeSkill(workspace, 'alpha', skill('alpha', '', 'SECRET BODY'));
    await writeSkill(workspace, 'beta', '---\nname: beta\ndescription: Use <tags> & such.\n---\nbody\n');
    const library = createSkillLibrary({ dirs: [workspace], db: getDb() });
    const catalog = await library.catalog();
    expect(catalog).toContain('<skill name="alpha">Does alpha things.</skill>');
    expect(catalog).toContain('<skill name="beta">Use &lt;tags&gt; &amp; such.</skill>');
    expect(catalog).not.toContain('SECRET BODY');
    expect((await library.catalog({ maxChars: 200 })).length).toBeLessThanOrEqual(200);
    expect(await createSkillLibrary({ dirs: [await tempDir()], db: getDb() }).catalog()).toBe('');
  });

  it('catalog follows a refresh: a skill added or changed on disk shows once the library looked again', async () => {
    const workspace = await tempDir();
    await writeSkill(workspace, 'alpha', skill('alpha'));
    const library = createSkillLibrary({ dirs: [workspace], db: getDb() });
    const first = await library.catalog();
    expect(await library.catalog()).toBe(first);
    await writeSkill(workspace, 'gamma', skill('gamma'));
    await writeSkill(
      workspace,
      'alpha',
      '---\nname: alpha\ndescription: Now does other things.\n---\nbody\n',
    );
    expect(await library.catalog()).toBe(first);
    await library.refresh();
    const second = await library.catalog();
    expect(second).toContain('<skill name="gamma">Does gamma things.</skill>');
    expect(second).toContain('<skill name="alpha">Now does other things.</skill>');
    expect(second).not.toContain('Does alpha things.');
    // Every budget holds, down to one too small for the header and footer.
    for (const maxChars of [240, 180, 150, 120]) {
      const within = await library.catalog({ maxChars });
      expect(within.length).toBeLessThanOrEqual(maxChars);
      if (maxChars === 120) expect(within).toBe('');
    }
  });

  it('keeps the front matter it read by its text: a library on the same store reads it again from there, a changed file afresh', async () => {
    const workspace = await tempDir();
    await writeSkill(workspace, 'alpha', skill('alpha', 'triggers: [alpha work]\nmetadata: { owner: me }\n'));
    const kv = createKvStore(getDb());
    const clock = createManualClock(77_000);
    const first = await createSkillLibrary({ dirs: [workspace], db: getDb(), clock }).get('alpha');
    expect(first).toMatchObject({ description: 'Does alpha things.', keywords: ['alpha work'] });
    const kept = await kv.list('skills.frontmatter');
    expect(kept).toHaveLength(1);
    expect(kept[0]!.updatedAt).toBe(77_000);
    expect(JSON.parse(kept[0]!.value)).toEqual({
      name: 'alpha',
      description: 'Does alpha things.',
      triggers: ['alpha work'],
      metadata: { owner: 'me' },
    });
    // The next library answers from the kept values (changed here to tell them apart from the file's) and
    // still validates them.
    await kv.set(
      'skills.frontmatter',
      kept[0]!.key,
      JSON.stringify({ name: 'alpha', description: 'Kept description.', version: '4' }),
    );
    const second = createSkillLibrary({ dirs: [workspace], db: getDb() });
    expect(await second.get('alpha')).toMatchObject({ description: 'Kept description.', version: 4 });
    // A damaged row is read past: the file is parsed again, and the row rewritten.
    await kv.set('skills.frontmatter', kept[0]!.key, '{"name": "alp');
    expect(await createSkillLibrary({ dirs: [workspace], db: getDb() }).get('alpha')).toMatchObject({
      description: 'Does alpha things.',
    });
    expect(JSON.parse((await kv.get('skills.frontmatter', kept[0]!.key))!)).toMatchObject({ name: 'alpha' });
    await kv.set('skills.frontmatter', kept[0]!.key, JSON.stringify({ name: 'alpha', description: '' }));
    const invalid = createSkillLibrary({ dirs: [workspace], db: getDb() });
    expect(await invalid.get('alpha')).toBeUndefined();
    expect((await invalid.problems())[0]!.reason).toMatch(/description/);
    // Another text is another key: the changed file is parsed, and kept beside the first.
    await writeSkill(workspace, 'alpha', skill('alpha', 'version: 2\n'));
    await second.refresh();
    expect(await second.get('alpha')).toMatchObject({ description: 'Does alpha things.', version: 2 });
    expect(await kv.list('skills.frontmatter')).toHaveLength(2);
  });

  it('keeps no front matter JSON would change or longer than 16 KiB, and forgets unused entries past 256', async () => {
    const workspace = await tempDir();
    await writeSkill(workspace, 'alpha', skill('alpha', 'metadata: { limit: .inf, ratio: .nan }\n'));
    // An agent may write skills: a huge front matter is read every time, never kept.
    await writeSkill(workspace, 'bulky', skill('bulky', `metadata: { filler: "${'x'.repeat(17_000)}" }\n`));
    const kv = createKvStore(getDb());
    for (let index = 0; index < 300; index++)
      await kv.set('skills.frontmatter', `gone-${index}`, JSON.stringify({ name: 'gone' }));
    for (let round = 0; round < 2; round++) {
      const alpha = await createSkillLibrary({ dirs: [workspace], db: getDb() }).get('alpha');
      expect(alpha?.frontmatter.metadata).toEqual({ limit: Number.POSITIVE_INFINITY, ratio: Number.NaN });
      expect((await createSkillLibrary({ dirs: [workspace], db: getDb() }).get('bulky'))?.description).toBe(
        'Does bulky things.',
      );
    }
    expect(await kv.list('skills.frontmatter')).toEqual([]);
  });

  it('reads every skill when the store cannot keep or give front matter (a full disk)', async () => {
    const workspace = await tempDir();
    await writeSkill(workspace, 'alpha', skill('alpha'));
    const db = getDb();
    const failing = (): Promise<never> =>
      Promise.reject(Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' }));
    const broken = new Proxy(db, {
      get: (target, key) =>
        key === 'transaction' || key === 'all' ? failing : Reflect.get(target, key, target),
    });
    const library = createSkillLibrary({ dirs: [workspace], db: broken });
    expect(await library.get('alpha')).toMatchObject({ description: 'Does alpha things.' });
    expect(await createKvStore(db).list('skills.frontmatter')).toEqual([]);
  });

  it('activation loads the body from disk, fills {baseDir}, records the activation and publishes it', async () => {
    const workspace = await tempDir();
    await writeSkill(workspace, 'alpha', skill('alpha', '', 'See {baseDir}/references/x.md'));
    const bus = createBus();
    const events: BusEvent[] = [];
    bus.on('skill:activated', (event) => events.push(event));
    const clock = createManualClock(42_000);
    const db = getDb();
    const library = createSkillLibrary({ dirs: [workspace], db, bus, clock });
    const activated = await library.activate('alpha', { runId: 'run_1', workItemId: 'w1', agentId: 'main' });
    expect(activated).toEqual({
      name: 'alpha',
      version: 1,
      body: `See ${path.join(workspace, 'alpha')}/references/x.md`,
      estimatedTokens: Math.ceil(activated.body.length / 4),
    });
    expect(
      await db.all(
        'SELECT skill_name, skill_version, activation_type, work_item_id, run_id, agent_id, activated_at FROM skill_activations',
      ),
    ).toEqual([
      {
        skill_name: 'alpha',
        skill_version: 1,
        activation_type: 'manual',
        work_item_id: 'w1',
        run_id: 'run_1',
        agent_id: 'main',
        activated_at: 42_000,
      },
    ]);
    expect(events.map((event) => event.data)).toEqual([
      { name: 'alpha', version: 1, activationType: 'manual', runId: 'run_1', workItemId: 'w1' },
    ]);
    const error = await library.activate('nope').catch((caught: unknown) => caught);
    expect(AgentdError.isInstance(error) && error.code).toBe('NOT_FOUND');
  });

  it('auto-activates by trigger keywords (whole words), most hits first, within count and token caps', async () => {
    const workspace = await tempDir();
    await writeSkill(workspace, 'pdf', skill('pdf', 'triggers: [pdf, invoice]\n'));
    await writeSkill(workspace, 'sql', skill('sql', 'triggers: { keywords: [sql, query] }\n'));
    await writeSkill(workspace, 'huge', skill('huge', 'triggers: [invoice]\n', 'x'.repeat(4000)));
    await writeSkill(
      workspace,
      'manual-only',
      skill('manual-only', 'triggers: [invoice]\nauto_activate: false\n'),
    );
    await writeSkill(workspace, 'no-triggers', skill('no-triggers'));
    const db = getDb();
    const library = createSkillLibrary({ dirs: [workspace], db });
    const text = 'Please read the PDF invoice and run an SQL query; pdfs galore';
    const activated = await library.autoActivate(text, { runId: 'r', maxTokens: 500 });
    expect(activated.map((entry) => entry.name)).toEqual(['pdf', 'sql']);
    expect(await db.all('SELECT skill_name, activation_type FROM skill_activations ORDER BY id')).toEqual([
      { skill_name: 'pdf', activation_type: 'auto' },
      { skill_name: 'sql', activation_type: 'auto' },
    ]);
    expect((await library.autoActivate(text, { maxSkills: 1 })).map((entry) => entry.name)).toEqual(['pdf']);
    expect(
      (await library.autoActivate(text, { exclude: ['pdf', 'sql'] })).map((entry) => entry.name),
    ).toEqual(['huge']);
    // Keywords match whole words: "sqlite" and "pdfs" do not trigger sql or pdf.
    expect(await library.autoActivate('sqlite and pdfs only')).toEqual([]);
  });

  it('search ranks by name, keywords and description', async () => {
    const workspace = await tempDir();
    await writeSkill(
      workspace,
      'git-helper',
      '---\nname: git-helper\ndescription: Commit and branch safely.\ntriggers: [rebase]\n---\nb\n',
    );
    await writeSkill(
      workspace,
      'writer',
      '---\nname: writer\ndescription: Write commit messages and docs.\n---\nb\n',
    );
    const library = createSkillLibrary({ dirs: [workspace], db: getDb() });
    expect((await library.search('git commit')).map((entry) => entry.name)).toEqual(['git-helper', 'writer']);
    expect((await library.search('rebase')).map((entry) => entry.name)).toEqual(['git-helper']);
    expect(await library.search('kubernetes')).toEqual([]);
  });

  it('create writes a valid skill, bumps the version on update and records provenance with ledger snippets', async () => {
    const workspace = await tempDir();
    const db = getDb();
    const ledger = createLedger({ db });
    await ledger.append('work_9', { entryType: 'finding', content: 'deploys need the VPN' });
    await ledger.append('work_9', { entryType: 'finding', content: 'run migrations first' });
    const clock = createManualClock(1_000);
    const library = createSkillLibrary({ dirs: [workspace], db, ledger, clock });
    const first = await library.create(
      {
        name: 'deploy-checklist',
        description: 'How to deploy.',
        content: '1. VPN\n2. migrate',
        triggers: ['deploy'],
      },
      { workItemId: 'work_9', ledgerEntrySeqs: [1, 2] },
    );
    expect(first).toMatchObject({
      name: 'deploy-checklist',
      version: 1,
      createdBy: 'agent',
      createdFrom: 'work_item:work_9',
      keywords: ['deploy'],
      autoActivate: true,
    });
    const file = await readFile(path.join(workspace, 'deploy-checklist', 'SKILL.md'), 'utf8');
    expect(parseSkillFile(file)).toMatchObject({ ok: true, body: '1. VPN\n2. migrate' });
    clock.advance(5);
    const second = await library.create(
      { name: 'deploy-checklist', description: 'How to deploy, v2.', content: 'updated' },
      { workItemId: 'work_10' },
    );
    expect(second.version).toBe(2);
    expect((await library.activate('deploy-checklist')).body).toBe('updated');
    expect(await library.provenance('deploy-checklist')).toEqual([
      {
        skillName: 'deploy-checklist',
        skillVersion: 1,
        sourceType: 'work_item',
        workItemId: 'work_9',
        createdAt: 1_000,
      },
      {
        skillName: 'deploy-checklist',
        skillVersion: 1,
        sourceType: 'ledger_entry',
        workItemId: 'work_9',
        ledgerSeq: 1,
        contentSnippet: 'deploys need the VPN',
        createdAt: 1_000,
      },
      {
        skillName: 'deploy-checklist',
        skillVersion: 1,
        sourceType: 'ledger_entry',
        workItemId: 'work_9',
        ledgerSeq: 2,
        contentSnippet: 'run migrations first',
        createdAt: 1_000,
      },
      {
        skillName: 'deploy-checklist',
        skillVersion: 2,
        sourceType: 'work_item',
        workItemId: 'work_10',
        createdAt: 1_005,
      },
    ]);
  });

  it('reads no SKILL.md that would exhaust or stall discovery: over the size limit, a FIFO, a device', async () => {
    const workspace = await tempDir();
    await writeSkill(workspace, 'fine', skill('fine'));
    // An agent with file tools or bash can make any of these in the workspace's skills folder.
    await writeSkill(workspace, 'huge', skill('huge', '', 'x'.repeat(maxSkillFileBytes)));
    await mkdir(path.join(workspace, 'fifo'));
    execFileSync('mkfifo', [path.join(workspace, 'fifo', 'SKILL.md')]);
    await mkdir(path.join(workspace, 'zeros'));
    await symlink('/dev/zero', path.join(workspace, 'zeros', 'SKILL.md'));
    const library = createSkillLibrary({ dirs: [workspace], db: getDb() });
    expect((await library.list()).map((entry) => entry.name)).toEqual(['fine']);
    const reasons = Object.fromEntries(
      (await library.problems()).map((problem) => [
        path.basename(path.dirname(problem.path)),
        problem.reason,
      ]),
    );
    expect(reasons).toEqual({
      fifo: 'cannot read: not a regular file',
      huge: `cannot read: larger than the limit of ${maxSkillFileBytes} bytes`,
      zeros: 'cannot read: not a regular file',
    });

    // A skill that grew past the limit after its discovery is not loaded by its activation either.
    await writeSkill(workspace, 'fine', skill('fine', '', 'y'.repeat(maxSkillFileBytes)));
    await expect(library.activate('fine')).rejects.toMatchObject({
      code: 'INVALID_REQUEST',
      message: expect.stringContaining('larger than the limit'),
    });
  });

  it('reads the first 1,000 skill folders of a directory by name and reports the rest', async () => {
    const workspace = await tempDir();
    await writeSkill(workspace, 'aaa-first', skill('aaa-first'));
    for (let index = 0; index < 1_000; index++)
      await mkdir(path.join(workspace, `empty-${String(index).padStart(4, '0')}`));
    await writeSkill(workspace, 'zzz-past-the-limit', skill('zzz-past-the-limit'));
    const library = createSkillLibrary({ dirs: [workspace], db: getDb() });
    expect((await library.list()).map((entry) => entry.name)).toEqual(['aaa-first']);
    expect(await library.problems()).toEqual([
      { path: workspace, reason: '1002 folders; only the first 1000 by name are read as skills' },
    ]);
  });

  it('create refuses a skill larger than a SKILL.md may be, and writes nothing', async () => {
    const workspace = await tempDir();
    const library = createSkillLibrary({ dirs: [workspace], db: getDb() });
    await expect(
      library.create({ name: 'long-one', description: 'd', content: 'z'.repeat(maxSkillFileBytes) }, {}),
    ).rejects.toMatchObject({ code: 'PAYLOAD_TOO_LARGE' });
    await expect(readFile(path.join(workspace, 'long-one', 'SKILL.md'), 'utf8')).rejects.toMatchObject({
      code: 'ENOENT',
    });
  });

  it('create refuses bad names and skills owned by a read-only folder', async () => {
    const workspace = await tempDir();
    const shared = await tempDir();
    await writeSkill(shared, 'shared-skill', skill('shared-skill'));
    const library = createSkillLibrary({ dirs: [workspace, shared], db: getDb() });
    const codeOf = (promise: Promise<unknown>) =>
      promise.then(
        () => 'ok',
        (error: unknown) => (AgentdError.isInstance(error) ? error.code : String(error)),
      );
    expect(await codeOf(library.create({ name: 'Bad Name', description: 'd', content: 'c' }, {}))).toBe(
      'INVALID_REQUEST',
    );
    expect(await codeOf(library.create({ name: '../escape', description: 'd', content: 'c' }, {}))).toBe(
      'INVALID_REQUEST',
    );
    expect(await codeOf(library.create({ name: 'shared-skill', description: 'd', content: 'c' }, {}))).toBe(
      'CONFLICT',
    );
  });

  it('flags skills unused for 30 days as stale and never deletes them', async () => {
    const workspace = await tempDir();
    await writeSkill(workspace, 'used', skill('used'));
    await writeSkill(workspace, 'old-file', skill('old-file'));
    await writeSkill(workspace, 'fresh-file', skill('fresh-file'));
    const day = 86_400_000;
    const clock = createManualClock(100 * day);
    const oldTime = new Date(10 * day);
    await utimes(path.join(workspace, 'old-file', 'SKILL.md'), oldTime, oldTime);
    const freshTime = new Date(95 * day);
    await utimes(path.join(workspace, 'fresh-file', 'SKILL.md'), freshTime, freshTime);
    await utimes(path.join(workspace, 'used', 'SKILL.md'), oldTime, oldTime);
    const library = createSkillLibrary({ dirs: [workspace], db: getDb(), clock });
    clock.set(80 * day);
    await library.activate('used');
    clock.set(100 * day);
    expect((await library.staleSkills()).map((entry) => entry.name)).toEqual(['old-file']);
    clock.set(111 * day);
    expect(await library.staleSkills({ olderThanDays: 30 })).toEqual([
      { name: 'old-file', lastUsedAt: 10 * day },
      { name: 'used', lastActivatedAt: 80 * day, lastUsedAt: 80 * day },
    ]);
    expect((await library.list()).map((entry) => entry.name).sort()).toEqual([
      'fresh-file',
      'old-file',
      'used',
    ]);
  });

  it('skill tools: discover, activate (body via metadata), create with provenance from the ledger', async () => {
    const workspace = await tempDir();
    await writeSkill(workspace, 'alpha', skill('alpha', 'triggers: [greek]\n'));
    const db = getDb();
    const ledger = createLedger({ db });
    await ledger.append('work_1', { entryType: 'plan', content: 'p' });
    await ledger.append('work_1', { entryType: 'finding', content: 'f' });
    await ledger.append('work_1', { entryType: 'decision', content: 'd' });
    const library = createSkillLibrary({ dirs: [workspace], db, ledger });
    const [discover, activate, create] = createSkillTools({ library, ledger });
    const context = createToolContext(workspace);
    expect(await discover!.execute(discover!.input.parse({ query: 'greek' }), context)).toBe(
      '- alpha (v1): Does alpha things.',
    );
    expect(await activate!.execute({ name: 'alpha' }, context)).toEqual({
      content: 'Skill alpha v1 is active; its instructions are now in your system prompt.',
      metadata: { activatedSkill: { name: 'alpha', version: 1, body: 'Instructions for alpha.' } },
    });
    expect(
      await create!.execute(
        create!.input.parse({ name: 'learned', description: 'what I learned', content: 'do x' }),
        context,
      ),
    ).toBe('Saved skill learned v1.');
    expect(
      (await library.provenance('learned')).map((record) => [record.sourceType, record.ledgerSeq]),
    ).toEqual([
      ['work_item', undefined],
      ['ledger_entry', 2],
      ['ledger_entry', 3],
    ]);
  });
});
