import { existsSync, readdirSync, realpathSync, statSync } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { type ChildIsolation, hookEvents, namespaceLauncher, type ToolsConfig } from '../tools/index.js';
import type { Logger } from '../util/index.js';
import { ErrorCodes, SystemError, UserInputError } from '../util/index.js';

export interface ToolSafety {
  /** Where executable hooks are loaded from: never inside the workspace. */
  hooksDir: string;
  /**
   * How hooks and bash start their children. Probing `unshare` starts a child process (10–20 ms of a start
   * here), so under `auto` it is probed at start only when a child is likely (bash on, or files in the
   * hooks directory), else at the first child.
   */
  isolation: () => ChildIsolation;
  /** What write_file / edit_file refuse even if it were inside the workspace. */
  protectedPaths: string[];
}

function realOrResolved(path: string): string {
  // The nearest existing ancestor decides where a not-yet-created directory will really be.
  let probe = resolve(path);
  const missing: string[] = [];
  while (!existsSync(probe) && dirname(probe) !== probe) {
    missing.unshift(relative(dirname(probe), probe));
    probe = dirname(probe);
  }
  return join(realpathSync(probe), ...missing);
}

function holdsFiles(dir: string): boolean {
  try {
    return readdirSync(dir).length > 0;
  } catch {
    return false;
  }
}

function isInside(root: string, candidate: string): boolean {
  const rel = relative(root, candidate);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

/**
 * Decides where hooks come from, how hooks and bash are started, and what the file tools must never write.
 * Hooks used to live in the workspace, where the agent's own write_file could rewrite them; they are now
 * loaded from `<state dir>/hooks` (or `tools.hooks.dir`), and a hook directory inside the workspace is
 * refused at start.
 */
export function prepareToolSafety(options: {
  tools: ToolsConfig;
  home: string;
  workspaceDir: string;
  configPath: string | undefined;
  logger: Logger;
}): ToolSafety {
  const { tools, home, workspaceDir, logger } = options;
  const configured = tools.hooks.dir;
  const hooksDir = configured
    ? resolve(options.configPath ? dirname(options.configPath) : home, configured)
    : join(home, 'hooks');
  if (isInside(realOrResolved(workspaceDir), realOrResolved(hooksDir)))
    throw new UserInputError({
      code: ErrorCodes.invalidConfig,
      message: `tools.hooks.dir (${hooksDir}) lies inside the workspace, where the agent's file tools could rewrite hooks; use a directory outside ${workspaceDir}.`,
    });

  const legacyDir = join(workspaceDir, 'hooks');
  if (existsSync(legacyDir)) {
    const legacy = readdirSync(legacyDir).filter((name) => {
      if (!hookEvents.some((event) => name === event || name.startsWith(`${event}.`))) return false;
      const info = statSync(join(legacyDir, name), { throwIfNoEntry: false });
      return info?.isFile() && (info.mode & 0o111) !== 0;
    });
    if (legacy.length > 0)
      logger.warn(
        { component: 'tools', files: legacy, legacyDir, hooksDir },
        'hooks in the workspace are no longer run (the agent could rewrite them); review them and move them to the hooks directory',
      );
  }

  let isolation: ChildIsolation | undefined;
  const chooseIsolation = (): ChildIsolation => {
    if (namespaceLauncher()) return 'namespace';
    if (tools.isolation === 'namespace')
      throw new SystemError({
        code: ErrorCodes.invalidConfig,
        message:
          'tools.isolation is namespace, but `unshare --user --pid --mount-proc` does not work on this machine (util-linux missing or user namespaces disabled).',
      });
    logger.warn(
      { component: 'tools' },
      "unshare with user namespaces is not available: hooks and bash run as plain children and can read agentd's environment through /proc",
    );
    return 'none';
  };
  if (tools.isolation === 'none') {
    isolation = 'none';
    logger.warn(
      { component: 'tools' },
      "tools.isolation is none: hooks and bash can read agentd's environment through /proc",
    );
  } else if (tools.isolation === 'namespace' || tools.bash.enabled || holdsFiles(hooksDir))
    isolation = chooseIsolation();

  const protectedPaths = [
    hooksDir,
    join(home, 'token'),
    ...['agentd.db', 'agentd.db-wal', 'agentd.db-shm', 'agentd.db-journal'].map((name) => join(home, name)),
    ...(options.configPath ? [options.configPath] : []),
  ];
  return { hooksDir, isolation: () => (isolation ??= chooseIsolation()), protectedPaths };
}
