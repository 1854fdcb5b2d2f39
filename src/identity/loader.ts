import { existsSync, type FSWatcher, statSync, watch as watchDirectory } from 'node:fs';
import { lstat, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  type Clock,
  ErrorCodes,
  type Logger,
  openRegularFile,
  readAtMost,
  silentLogger,
  systemClock,
  UserInputError,
} from '../util/index.js';
import { type MarkdownSection, splitSections } from './markdown-sections.js';

/** Precedence order, highest first. AGENT.md wins over AGENTS.md when both exist. */
const layerFiles: ReadonlyArray<{ layer: 'SOUL' | 'AGENT' | 'IDENTITY' | 'USER'; names: readonly string[] }> =
  [
    { layer: 'SOUL', names: ['SOUL.md'] },
    { layer: 'AGENT', names: ['AGENT.md', 'AGENTS.md'] },
    { layer: 'IDENTITY', names: ['IDENTITY.md'] },
    { layer: 'USER', names: ['USER.md'] },
  ];

/** The last-resort prompt when not even the packaged defaults can be found. */
const lastResortPrompt = 'You are a helpful AI assistant.';

export interface IdentityLayer {
  /** The file that was used (`SOUL.md`, `AGENT.md` or `AGENTS.md`, …). */
  file: string;
  /** False when the agent has no such file and the default text was used. */
  present: boolean;
  /** Absolute path of the file used (the agent's own, the workspace root's, or the packaged default). */
  path: string | null;
}

export interface ShadowedHeading {
  heading: string;
  /** The file whose section was kept. */
  keptFrom: string;
  /** The lower-precedence file whose section was dropped. */
  shadowedIn: string;
}

export interface IdentityPacket {
  agentId: string;
  /** Same files → same bytes. */
  systemPrompt: string;
  layers: IdentityLayer[];
  shadowed: ShadowedHeading[];
  warnings: string[];
}

export interface IdentityLoaderOptions {
  workspaceDir: string;
  logger?: Logger;
  /**
   * Also watch the directories with fs.watch, so a change is noticed (and announced) without a load, and a
   * build is used without statting its files while nothing changed (`watchedRevalidateMs`).
   */
  watch?: boolean;
  /** The agent whose files may live in the workspace root. Default `main`. */
  defaultAgentId?: string;
  /** Larger files are cut at a line boundary, with a warning. Default 1 MiB. */
  maxFileBytes?: number;
  /** Where the default texts live; defaults to the package's `defaults/workspace`. */
  defaultsDir?: string;
  /**
   * How long a built identity is used without checking its files again (default 0: every load checks).
   * The check stats every candidate file, most of them absent, which costs more than the rest of a chat
   * turn's bookkeeping; a change is then seen at the first load after this time (at once with `watch`).
   */
  revalidateMs?: number;
  /**
   * With `watch`: how long a built identity is used without statting its files while watchers cover every
   * folder they may be in (default 60 s, or `revalidateMs` when longer). A watcher reports a change at once;
   * the check after this time is for a change it could not see (a network filesystem written from another
   * machine, a hard link edited through another folder).
   */
  watchedRevalidateMs?: number;
  /** Agents whose built identity is kept (default 256), the least recently built dropped first. */
  maxCachedAgents?: number;
  clock?: Clock;
}

export interface IdentityLoader {
  load(agentId: string): Promise<IdentityPacket>;
  /** The agent's system prompt alone: what a chat turn needs, without copying the whole packet. */
  systemPrompt(agentId: string): Promise<string>;
  /** Called with the agent id when a watched identity file changed (needs `watch: true`). */
  onChange(listener: (agentId: string) => void): () => void;
  close(): void;
}

const agentIdPattern = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
const layerFileNames = new Set(layerFiles.flatMap((layer) => layer.names));
/**
 * Where a watched folder reports writes to the files in it (inotify, FSEvents, ReadDirectoryChangesW). With
 * kqueue (the BSDs) it reports only names that come and go: there a build is checked every `revalidateMs`.
 */
const folderWatchesSeeFileWrites = ['linux', 'darwin', 'win32'].includes(process.platform);

interface CachedBuild {
  signature: string;
  packet: IdentityPacket;
  checkedAtMs: number;
  /**
   * Set when the files were checked while watchers covered every folder they may be in (`changes` then), and
   * no candidate file is a symbolic link, whose target's folder nobody watches.
   */
  watchedSince?: number;
}

let packagedDefaults: string | null | undefined;
function findPackagedDefaults(): string | null {
  if (packagedDefaults !== undefined) return packagedDefaults;
  let directory = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const candidate = join(directory, 'defaults', 'workspace');
    if (existsSync(join(candidate, 'SOUL.md')) && existsSync(join(directory, 'package.json'))) {
      packagedDefaults = candidate;
      return candidate;
    }
    const parent = dirname(directory);
    if (parent === directory) {
      packagedDefaults = null;
      return null;
    }
    directory = parent;
  }
}

async function readLimited(path: string, maxBytes: number): Promise<{ text: string; truncated: boolean }> {
  // The file was a regular file when looked up, but the agent can write the workspace: one swapped for a FIFO
  // meanwhile must not block the read (and a thread of the pool). It reads as empty.
  const opened = await openRegularFile(path);
  if (!opened) return { text: '', truncated: false };
  try {
    const bytes = await readAtMost(opened.handle, opened.size, maxBytes);
    if (bytes.length <= maxBytes) return { text: bytes.toString('utf8'), truncated: false };
    const text = bytes.subarray(0, maxBytes).toString('utf8');
    return { text: text.slice(0, Math.max(0, text.lastIndexOf('\n'))), truncated: true };
  } finally {
    await opened.handle.close();
  }
}

/**
 * Loads an agent's identity: SOUL.md > AGENT.md (or AGENTS.md) > IDENTITY.md > USER.md, merged by
 * heading so a section of a higher layer wins over a section with the same heading (case-insensitive)
 * below it. Files are looked up in `<workspace>/agents/<agentId>/`, and for the default agent also in the
 * workspace root. A missing layer falls back to the packaged default text, with a warning.
 *
 * Reload: every `load` compares the files' mtime/size with the cached build and rebuilds on change; with
 * `watch`, fs.watch also invalidates the cache and notifies `onChange` listeners.
 */
export function createIdentityLoader(options: IdentityLoaderOptions): IdentityLoader {
  const logger = (options.logger ?? silentLogger).child({ component: 'identity' });
  const defaultAgentId = options.defaultAgentId ?? 'main';
  const maxFileBytes = options.maxFileBytes ?? 1024 * 1024;
  const revalidateMs = options.revalidateMs ?? 0;
  const clock = options.clock ?? systemClock;
  const maxCachedAgents = options.maxCachedAgents ?? 256;
  const watchedRevalidateMs = options.watchedRevalidateMs ?? 60_000;
  const agentsDir = join(options.workspaceDir, 'agents');
  const cache = new Map<string, CachedBuild>();
  const listeners = new Set<(agentId: string) => void>();
  const watchers = new Map<string, { watcher: FSWatcher; inode: number }>();
  const watchedAgents = new Map<string, Set<string>>();
  /** Changes the watchers reported (and watchers lost): a build checked before the last one is checked again. */
  let changes = 0;
  let closed = false;
  /** Folders a watcher could not be made for, each told once. */
  const unwatchable = new Set<string>();

  const directoriesOf = (agentId: string): string[] => {
    const own = join(agentsDir, agentId);
    return agentId === defaultAgentId ? [own, options.workspaceDir] : [own];
  };

  const candidatesOf = (agentId: string): string[] =>
    directoriesOf(agentId).flatMap((directory) =>
      layerFiles.flatMap((layer) => layer.names.map((name) => join(directory, name))),
    );

  /**
   * The candidate files' times and sizes, and whether any of them is a symbolic link (also one whose target is
   * not there yet): a change to a link's target is seen only by statting it.
   */
  const signatureOf = async (agentId: string): Promise<{ signature: string; linksAFile: boolean }> => {
    let linksAFile = false;
    const parts = await Promise.all(
      candidatesOf(agentId).map(async (path) => {
        try {
          let info = await lstat(path);
          if (info.isSymbolicLink()) {
            linksAFile = true;
            info = await stat(path);
          }
          return info.isFile() ? `${path}:${info.mtimeMs}:${info.ctimeMs}:${info.size}` : `${path}:-`;
        } catch {
          return `${path}:-`;
        }
      }),
    );
    return { signature: parts.join('|'), linksAFile };
  };

  const announce = (agentId: string) => {
    cache.delete(agentId);
    for (const listener of listeners) {
      try {
        listener(agentId);
      } catch (error) {
        logger.warn({ err: error }, 'identity change listener threw');
      }
    }
  };

  /**
   * What a watcher of `directory` reports: a layer file came, went or changed (its folder's agents), an agent's
   * folder came or went (`agents/<id>`: that agent), or `agents/` or a watched folder itself did, or the
   * platform did not say what (every agent). Anything else in the folder (the workspace root is the agents'
   * working folder) is not an identity's business. A folder that came or went takes the watchers below it
   * with it: they are made again, on the folders there now, when the identities are next checked.
   */
  const onWatchedChange = (directory: string, name: string | undefined) => {
    // A watched folder moved or deleted reports its own name.
    const itself = name === basename(directory);
    const layerFile = name !== undefined && layerFileNames.has(name);
    const agentFolder = directory === agentsDir;
    const agentsFolder = directory === options.workspaceDir && name === 'agents';
    if (name !== undefined && !itself && !layerFile && !agentFolder && !agentsFolder) return;
    changes++;
    if (layerFile && !itself) {
      for (const agentId of watchedAgents.get(directory) ?? []) announce(agentId);
      return;
    }
    if (agentFolder && name !== undefined && !itself) {
      unwatch(join(agentsDir, name));
      if (cache.has(name)) announce(name);
      return;
    }
    const rootGone = itself && directory === options.workspaceDir;
    for (const watched of [...watchers.keys()])
      if (rootGone || watched !== options.workspaceDir) unwatch(watched);
    for (const agentId of [...cache.keys()]) announce(agentId);
  };

  const unwatch = (directory: string) => {
    watchers.get(directory)?.watcher.close();
    watchers.delete(directory);
  };

  /**
   * Watches `directory` unless a watcher already follows the folder there now (the same inode): true when one
   * does. A folder that is not there, or cannot be watched (no inotify watches left), is not.
   */
  const watchFolder = (directory: string): boolean => {
    const info = statSync(directory, { throwIfNoEntry: false });
    const current = watchers.get(directory);
    if (current && info?.isDirectory() && current.inode === info.ino) return true;
    if (current) unwatch(directory);
    if (!info?.isDirectory()) return false;
    try {
      const watcher = watchDirectory(directory, { persistent: false }, (_event, fileName) =>
        onWatchedChange(directory, fileName?.toString()),
      );
      watcher.on('error', (error) => {
        logger.warn({ err: error, directory }, 'identity watcher failed; changes are still seen on load');
        unwatch(directory);
        changes++;
      });
      watchers.set(directory, { watcher, inode: info.ino });
      unwatchable.delete(directory);
      return true;
    } catch (error) {
      // Tried again at each check (every revalidateMs while it fails), told once: out of inotify watches,
      // every agent's check would otherwise log it every second.
      if (unwatchable.size >= maxCachedAgents) unwatchable.clear();
      if (!unwatchable.has(directory))
        logger.warn(
          { err: error, directory },
          'cannot watch identity directory; changes are still seen on load',
        );
      unwatchable.add(directory);
      return false;
    }
  };

  /** Drops an agent's build and, unless another agent's files may be there, the watcher of its own folder. */
  const forget = (agentId: string) => {
    cache.delete(agentId);
    const [own] = directoriesOf(agentId);
    const agents = watchedAgents.get(own!);
    agents?.delete(agentId);
    if (agents?.size !== 0) return;
    watchedAgents.delete(own!);
    unwatch(own!);
  };

  /**
   * With `watch`, watches the folders the agent's files may be in, or for one that is not there the folder it
   * would be made in: true when every one of them is watched, so that no change to the agent's identity can
   * pass unreported. Only folders that exist are watched (session keys name agent ids of a caller's choosing),
   * and an agent is remembered only for its own folder.
   */
  const watchFoldersOf = (agentId: string): boolean => {
    if (!options.watch || closed) return false;
    let covered = true;
    for (const directory of directoriesOf(agentId)) {
      if (watchFolder(directory)) {
        const agents = watchedAgents.get(directory) ?? new Set<string>();
        agents.add(agentId);
        watchedAgents.set(directory, agents);
        continue;
      }
      // Not there: what to watch is its creation, in agents/ or, without that folder, in the workspace root.
      const creationWatched =
        directory !== options.workspaceDir && (watchFolder(agentsDir) || watchFolder(options.workspaceDir));
      if (!creationWatched) covered = false;
    }
    return covered && folderWatchesSeeFileWrites;
  };

  const build = async (agentId: string): Promise<IdentityPacket> => {
    const warnings: string[] = [];
    const layers: IdentityLayer[] = [];
    const shadowed: ShadowedHeading[] = [];
    const kept = new Map<string, string>();
    const blocks: string[] = [];
    const defaultsDir = options.defaultsDir ?? findPackagedDefaults();
    for (const layer of layerFiles) {
      let found: { path: string; file: string } | undefined;
      for (const directory of directoriesOf(agentId)) {
        for (const name of layer.names) {
          const path = join(directory, name);
          try {
            if ((await stat(path)).isFile()) found = { path, file: name };
          } catch {
            // Not there: try the next candidate.
          }
          if (found) break;
        }
        if (found) break;
      }
      let text: string;
      let file: string;
      if (found) {
        const read = await readLimited(found.path, maxFileBytes);
        if (read.truncated)
          warnings.push(`${found.path} is larger than ${maxFileBytes} bytes; only the first part is used.`);
        text = read.text;
        file = found.file;
        layers.push({ file, present: true, path: found.path });
      } else {
        file = layer.names[layer.names.length - 1]!;
        const defaultPath = defaultsDir ? join(defaultsDir, file) : null;
        const fallback =
          defaultPath && existsSync(defaultPath) ? (await readLimited(defaultPath, maxFileBytes)).text : '';
        text = fallback;
        warnings.push(
          `${layer.names.join(' or ')} not found for agent "${agentId}" (looked in ${directoriesOf(agentId).join(', ')}); using the default.`,
        );
        layers.push({ file, present: false, path: fallback ? defaultPath : null });
      }
      const sections: MarkdownSection[] = [];
      for (const section of splitSections(text)) {
        const owner = kept.get(section.key);
        if (owner !== undefined) {
          shadowed.push({ heading: section.heading || '(preamble)', keptFrom: owner, shadowedIn: file });
          continue;
        }
        kept.set(section.key, file);
        sections.push(section);
      }
      if (sections.length > 0) blocks.push(sections.map((section) => section.text).join('\n\n'));
    }
    const systemPrompt = blocks.length > 0 ? `${blocks.join('\n\n')}\n` : `${lastResortPrompt}\n`;
    for (const warning of warnings) logger.warn({ agentId }, warning);
    for (const entry of shadowed) {
      logger.warn(
        { agentId, ...entry },
        `identity heading "${entry.heading}" in ${entry.shadowedIn} is shadowed by ${entry.keptFrom}`,
      );
    }
    return { agentId, systemPrompt, layers, shadowed, warnings };
  };

  const checking = new Map<string, Promise<IdentityPacket>>();
  const revalidate = async (agentId: string): Promise<IdentityPacket> => {
    const now = clock.now();
    const changesBefore = changes;
    const watched = watchFoldersOf(agentId);
    const { signature, linksAFile } = await signatureOf(agentId);
    let cached = cache.get(agentId);
    if (cached?.signature !== signature) {
      const packet = await build(agentId);
      cache.delete(agentId);
      // The agents loaded most recently: a caller naming new agent ids must not grow it for good.
      if (cache.size >= maxCachedAgents) forget(cache.keys().next().value!);
      cached = { signature, packet, checkedAtMs: now };
      cache.set(agentId, cached);
    }
    cached.checkedAtMs = now;
    cached.watchedSince = watched && !linksAFile ? changesBefore : undefined;
    return cached.packet;
  };

  /** The cached packet itself: callers get a copy (or an immutable part of it). */
  const current = async (agentId: string): Promise<IdentityPacket> => {
    if (!agentIdPattern.test(agentId)) {
      throw new UserInputError({
        code: ErrorCodes.invalidRequest,
        message: `"${agentId}" is not a valid agent id.`,
      });
    }
    const cached = cache.get(agentId);
    if (cached) {
      const trustedForMs =
        cached.watchedSince === changes ? Math.max(watchedRevalidateMs, revalidateMs) : revalidateMs;
      if (clock.now() - cached.checkedAtMs < trustedForMs) return cached.packet;
    }
    // Loads that find the cache due at the same moment share one check instead of each statting the files.
    let check = revalidateMs > 0 ? checking.get(agentId) : undefined;
    if (!check) {
      check = revalidate(agentId).finally(() => checking.delete(agentId));
      if (revalidateMs > 0) checking.set(agentId, check);
    }
    return check;
  };

  return {
    load: async (agentId) => structuredClone(await current(agentId)),
    systemPrompt: async (agentId) => (await current(agentId)).systemPrompt,
    onChange(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    close() {
      closed = true;
      for (const { watcher } of watchers.values()) watcher.close();
      watchers.clear();
      watchedAgents.clear();
      listeners.clear();
    },
  };
}
