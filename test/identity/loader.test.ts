import { execFileSync } from 'node:child_process';
import {
  linkSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createIdentityLoader, type IdentityLoader, splitSections } from '../../src/identity/index.js';
import { createManualClock, createRecordingLogger } from '../../src/util/index.js';

describe('identity loader', () => {
  let workspace: string;
  /** A folder outside the workspace, which no watcher of the loader's follows. */
  let outside: string;
  let loader: IdentityLoader | undefined;
  const write = (relative: string, text: string) => {
    const path = join(workspace, relative);
    mkdirSync(join(path, '..'), { recursive: true });
    writeFileSync(path, text);
    return path;
  };

  /** A file of the workspace that is a link (hard or symbolic) to a new file outside it: that file's path. */
  const linkedLayer = (link: (target: string, path: string) => void, relative: string, text: string) => {
    const target = join(outside, relative.replaceAll('/', '-'));
    writeFileSync(target, text);
    mkdirSync(join(workspace, relative, '..'), { recursive: true });
    link(target, join(workspace, relative));
    return target;
  };

  /** Makes a change and waits for the loader's watchers to announce one: the agent they name. */
  const announcedAfter = async (change: () => void): Promise<string> => {
    const announced = new Promise<string>((resolve) => loader!.onChange(resolve));
    change();
    return await announced;
  };

  beforeEach(() => {
    workspace = mkdtempSync(join(tmpdir(), 'agentd-identity-'));
    outside = mkdtempSync(join(tmpdir(), 'agentd-identity-outside-'));
  });
  afterEach(() => {
    loader?.close();
    loader = undefined;
    rmSync(workspace, { recursive: true, force: true });
    rmSync(outside, { recursive: true, force: true });
  });

  it('merges SOUL > AGENT > IDENTITY > USER by heading and reports what was shadowed', async () => {
    write('agents/ada/SOUL.md', 'Soul preamble.\n\n## Tone\n\nCalm and exact.\n');
    write(
      'agents/ada/AGENT.md',
      'Agent preamble (dropped).\n\n## tone\n\nLoud.\n\n## Rules\n\nAlways cite sources.\n',
    );
    write('agents/ada/AGENTS.md', '## Ignored\n\nAGENT.md wins over AGENTS.md.\n');
    write('agents/ada/IDENTITY.md', '# Rules\n\nNever cite.\n\n## Name\n\nAda\n');
    write('agents/ada/USER.md', '## User\n\nPrefers metric units.\n');
    const logger = createRecordingLogger();
    loader = createIdentityLoader({ workspaceDir: workspace, logger });
    const packet = await loader.load('ada');
    expect(packet.systemPrompt).toBe(
      'Soul preamble.\n\n## Tone\n\nCalm and exact.\n\n## Rules\n\nAlways cite sources.\n\n## Name\n\nAda\n\n## User\n\nPrefers metric units.\n',
    );
    expect(packet.layers.map((layer) => [layer.file, layer.present])).toEqual([
      ['SOUL.md', true],
      ['AGENT.md', true],
      ['IDENTITY.md', true],
      ['USER.md', true],
    ]);
    expect(packet.shadowed).toEqual([
      { heading: '(preamble)', keptFrom: 'SOUL.md', shadowedIn: 'AGENT.md' },
      { heading: 'tone', keptFrom: 'SOUL.md', shadowedIn: 'AGENT.md' },
      { heading: 'Rules', keptFrom: 'AGENT.md', shadowedIn: 'IDENTITY.md' },
    ]);
    expect(packet.warnings).toEqual([]);
    expect(logger.records.filter((record) => record.message?.includes('shadowed'))).toHaveLength(3);
  });

  it('keeps the identities of the most recently built agents only, however many ids callers name', async () => {
    const logger = createRecordingLogger();
    loader = createIdentityLoader({ workspaceDir: workspace, logger, maxCachedAgents: 2 });
    const builds = (agentId: string) =>
      logger.records.filter(
        (record) => record.object.agentId === agentId && record.message?.includes('not found'),
      ).length;
    await loader.load('a0');
    const once = builds('a0');
    expect(once).toBeGreaterThan(0);
    await loader.load('a0');
    expect(builds('a0')).toBe(once);
    // Two other agents later, a0 was dropped and is built again.
    await loader.load('a1');
    await loader.load('a2');
    await loader.load('a0');
    expect(builds('a0')).toBe(2 * once);
  });

  it('falls back to the packaged defaults with a warning for each missing file', async () => {
    write('agents/bob/SOUL.md', '# Soul\n\nYou are Bob.\n');
    const logger = createRecordingLogger();
    loader = createIdentityLoader({ workspaceDir: workspace, logger });
    const packet = await loader.load('bob');
    expect(packet.layers.map((layer) => [layer.file, layer.present])).toEqual([
      ['SOUL.md', true],
      ['AGENTS.md', false],
      ['IDENTITY.md', false],
      ['USER.md', false],
    ]);
    expect(packet.warnings).toHaveLength(3);
    expect(packet.warnings[0]).toContain('AGENT.md or AGENTS.md not found for agent "bob"');
    expect(packet.systemPrompt.startsWith('# Soul\n\nYou are Bob.\n\n# Operating instructions')).toBe(true);
    expect(packet.systemPrompt).toContain(
      readFileSync(new URL('../../defaults/workspace/USER.md', import.meta.url), 'utf8').trim(),
    );
    expect(logger.records.filter((record) => record.level === 'warn')).toHaveLength(3);
    const bare = await loader.load('nobody');
    expect(bare.layers.every((layer) => !layer.present)).toBe(true);
    expect(bare.systemPrompt).toContain('You are a capable, honest assistant');
  });

  it('takes a FIFO or a link to a device for a missing file, without blocking on it', async () => {
    // An agent with bash can make either in the workspace; reading one would never end.
    write('agents/eve/SOUL.md', '');
    rmSync(join(workspace, 'agents/eve/SOUL.md'));
    execFileSync('mkfifo', [join(workspace, 'agents/eve/SOUL.md')]);
    symlinkSync('/dev/zero', join(workspace, 'agents/eve/USER.md'));
    write('agents/eve/IDENTITY.md', '## Name\n\nEve\n');
    loader = createIdentityLoader({ workspaceDir: workspace, logger: createRecordingLogger() });
    const packet = await loader.load('eve');
    expect(packet.layers.map((layer) => [layer.file, layer.present])).toEqual([
      ['SOUL.md', false],
      ['AGENTS.md', false],
      ['IDENTITY.md', true],
      ['USER.md', false],
    ]);
    expect(packet.systemPrompt).toContain('## Name\n\nEve');
  });

  it('uses the workspace root for the default agent only', async () => {
    write('SOUL.md', '# Soul\n\nRoot soul.\n');
    write('agents/main/USER.md', '# User\n\nMain user.\n');
    loader = createIdentityLoader({ workspaceDir: workspace });
    const main = await loader.load('main');
    expect(main.layers[0]).toMatchObject({ present: true, path: join(workspace, 'SOUL.md') });
    expect(main.systemPrompt).toContain('Root soul.');
    expect(main.systemPrompt).toContain('Main user.');
    const other = await loader.load('other');
    expect(other.systemPrompt).not.toContain('Root soul.');
    await expect(loader.load('../etc')).rejects.toMatchObject({ code: 'INVALID_REQUEST' });
  });

  it('is deterministic: same files, same bytes, also with CRLF line endings', async () => {
    write('agents/det/SOUL.md', '# A\r\n\r\nx  \r\n\r\n\r\n# B\r\ny\r\n');
    loader = createIdentityLoader({ workspaceDir: workspace });
    const first = await loader.load('det');
    const fresh = createIdentityLoader({ workspaceDir: workspace });
    const second = await fresh.load('det');
    fresh.close();
    expect(second.systemPrompt).toBe(first.systemPrompt);
    expect(first.systemPrompt.startsWith('# A\n\nx\n\n# B\ny\n\n')).toBe(true);
  });

  it('reloads when a file changes (mtime check on load)', async () => {
    const path = write('agents/ren/SOUL.md', '# Soul\n\nVersion one.\n');
    loader = createIdentityLoader({ workspaceDir: workspace });
    expect((await loader.load('ren')).systemPrompt).toContain('Version one.');
    expect((await loader.load('ren')).systemPrompt).toContain('Version one.');
    writeFileSync(path, '# Soul\n\nVersion two.\n');
    const later = new Date(Date.now() + 5_000);
    utimesSync(path, later, later);
    expect((await loader.load('ren')).systemPrompt).toContain('Version two.');
    write('agents/ren/USER.md', '# User\n\nNew user file.\n');
    const packet = await loader.load('ren');
    expect(packet.systemPrompt).toContain('New user file.');
    expect(packet.layers[3]).toMatchObject({ present: true });
  });

  it('checks the files at most once per revalidateMs', async () => {
    const path = write('agents/rev/SOUL.md', '# Soul\n\nVersion one.\n');
    const clock = createManualClock();
    loader = createIdentityLoader({ workspaceDir: workspace, revalidateMs: 1_000, clock });
    expect((await loader.load('rev')).systemPrompt).toContain('Version one.');
    writeFileSync(path, '# Soul\n\nVersion two.\n');
    const later = new Date(Date.now() + 5_000);
    utimesSync(path, later, later);
    clock.advance(999);
    expect((await loader.load('rev')).systemPrompt).toContain('Version one.');
    expect(await loader.systemPrompt('rev')).toContain('Version one.');
    clock.advance(1);
    expect(await loader.systemPrompt('rev')).toContain('Version two.');
    expect(await loader.systemPrompt('rev')).toBe((await loader.load('rev')).systemPrompt);
    await expect(loader.systemPrompt('../etc')).rejects.toMatchObject({ code: 'INVALID_REQUEST' });
  });

  it("hands out copies: a caller changing its packet changes nobody else's", async () => {
    write('agents/own/SOUL.md', '# Soul\n\nMine.\n');
    loader = createIdentityLoader({ workspaceDir: workspace, revalidateMs: 60_000 });
    const first = await loader.load('own');
    first.systemPrompt = 'tampered';
    first.layers.length = 0;
    const second = await loader.load('own');
    expect(second.systemPrompt).toContain('Mine.');
    expect(second.layers.length).toBeGreaterThan(0);
    expect(await loader.systemPrompt('own')).toContain('Mine.');
  });

  it('announces changes to watchers with watch: true', async () => {
    write('agents/wat/SOUL.md', '# Soul\n\nBefore.\n');
    loader = createIdentityLoader({ workspaceDir: workspace, watch: true });
    await loader.load('wat');
    expect(await announcedAfter(() => write('agents/wat/IDENTITY.md', '# Name\n\nWatty\n'))).toBe('wat');
    expect((await loader.load('wat')).systemPrompt).toContain('Watty');
  });

  it('with watch, uses a build without statting its files until a watcher reports a change or watchedRevalidateMs passes', async () => {
    const original = linkedLayer(linkSync, 'agents/hard/SOUL.md', '# Soul\n\nVersion one.\n');
    const clock = createManualClock();
    loader = createIdentityLoader({
      workspaceDir: workspace,
      watch: true,
      revalidateMs: 1_000,
      watchedRevalidateMs: 60_000,
      clock,
    });
    expect(await loader.systemPrompt('hard')).toContain('Version one.');
    // Written through a hard link in another folder: no watcher of the agent's folders hears of it, and only
    // a stat of the file would tell.
    writeFileSync(original, '# Soul\n\nVersion two, a longer one.\n');
    await new Promise((resolve) => setTimeout(resolve, 50));
    clock.advance(59_999);
    expect(await loader.systemPrompt('hard')).toContain('Version one.');
    clock.advance(1);
    expect(await loader.systemPrompt('hard')).toContain('Version two, a longer one.');
    // A change in the agent's folder is reported, and seen at once.
    expect(await announcedAfter(() => write('agents/hard/USER.md', '# User\n\nSeen at once.\n'))).toBe(
      'hard',
    );
    expect(await loader.systemPrompt('hard')).toContain('Seen at once.');
  });

  it('with watch, checks a layer that is a symbolic link every revalidateMs: its target is in a folder nobody watches', async () => {
    const target = linkedLayer(symlinkSync, 'agents/sym/SOUL.md', '# Soul\n\nLinked one.\n');
    const clock = createManualClock();
    loader = createIdentityLoader({ workspaceDir: workspace, watch: true, revalidateMs: 1_000, clock });
    expect(await loader.systemPrompt('sym')).toContain('Linked one.');
    writeFileSync(target, '# Soul\n\nLinked two, a longer one.\n');
    clock.advance(1_000);
    expect(await loader.systemPrompt('sym')).toContain('Linked two, a longer one.');
    // A link whose target is not there yet counts too: the target may appear without a word to the watchers.
    write('agents/dangle/SOUL.md', '# Soul\n\nA plain file.\n');
    const later = join(outside, 'user.md');
    symlinkSync(later, join(workspace, 'agents', 'dangle', 'USER.md'));
    expect(await loader.systemPrompt('dangle')).not.toContain('Linked user.');
    writeFileSync(later, '# User\n\nLinked user.\n');
    clock.advance(1_000);
    expect(await loader.systemPrompt('dangle')).toContain('Linked user.');
  });

  it("with watch, sees folders made after the first load: agents/, then the agent's own, then its files", async () => {
    // The clock stands still: only the watchers can tell the loader that anything changed.
    loader = createIdentityLoader({
      workspaceDir: workspace,
      watch: true,
      revalidateMs: 1_000,
      clock: createManualClock(),
      logger: createRecordingLogger(),
    });
    expect(await loader.systemPrompt('late')).not.toContain('Late soul.');
    expect(await announcedAfter(() => write('agents/late/SOUL.md', '# Soul\n\nLate soul.\n'))).toBe('late');
    expect(await loader.systemPrompt('late')).toContain('Late soul.');
    expect(await announcedAfter(() => write('agents/late/USER.md', '# User\n\nLate user.\n'))).toBe('late');
    expect(await loader.systemPrompt('late')).toContain('Late user.');
    // agents/ exists now: a second agent's folder is seen through it.
    expect(await loader.systemPrompt('later')).not.toContain('Later soul.');
    expect(await announcedAfter(() => write('agents/later/SOUL.md', '# Soul\n\nLater soul.\n'))).toBe(
      'later',
    );
    expect(await loader.systemPrompt('later')).toContain('Later soul.');
  });

  it('with watch, follows a folder replaced by another of the same name', async () => {
    write('agents/swap/SOUL.md', '# Soul\n\nFirst folder.\n');
    loader = createIdentityLoader({
      workspaceDir: workspace,
      watch: true,
      revalidateMs: 1_000,
      clock: createManualClock(),
    });
    expect(await loader.systemPrompt('swap')).toContain('First folder.');
    expect(
      await announcedAfter(() => {
        renameSync(join(workspace, 'agents', 'swap'), join(workspace, 'agents', 'swap-old'));
        write('agents/swap/SOUL.md', '# Soul\n\nSecond folder.\n');
      }),
    ).toBe('swap');
    expect(await loader.systemPrompt('swap')).toContain('Second folder.');
    // The watcher follows the folder there now, not the one moved away.
    expect(await announcedAfter(() => write('agents/swap/IDENTITY.md', '# Name\n\nSwapped\n'))).toBe('swap');
    expect(await loader.systemPrompt('swap')).toContain('Swapped');
  });

  it('with watch, stops watching the folder of an agent whose build it no longer keeps', async () => {
    for (const agentId of ['first', 'second', 'third'])
      write(`agents/${agentId}/SOUL.md`, `# Soul\n\n${agentId}\n`);
    loader = createIdentityLoader({ workspaceDir: workspace, watch: true, maxCachedAgents: 2 });
    for (const agentId of ['first', 'second', 'third']) await loader.load(agentId);
    const announced: string[] = [];
    const third = new Promise<void>((resolve) =>
      loader!.onChange((agentId) => {
        announced.push(agentId);
        if (agentId === 'third') resolve();
      }),
    );
    write('agents/first/USER.md', '# User\n\nFirst user.\n');
    write('agents/third/USER.md', '# User\n\nThird user.\n');
    await third;
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect([...new Set(announced)]).toEqual(['third']);
    // Loaded again, it is built from its files as they are now, and watched again.
    expect((await loader.load('first')).systemPrompt).toContain('First user.');
  });

  it('does not split on headings inside fenced code blocks', () => {
    expect(
      splitSections('# Real\n\n```md\n# not a heading\n```\n\n## Next ##\ntext').map(
        (section) => section.key,
      ),
    ).toEqual(['real', 'next']);
  });

  it('ships default workspace files for every layer', () => {
    for (const file of ['SOUL.md', 'AGENTS.md', 'IDENTITY.md', 'USER.md']) {
      const text = readFileSync(new URL(`../../defaults/workspace/${file}`, import.meta.url), 'utf8');
      expect(splitSections(text).length).toBeGreaterThan(0);
    }
  });
});
