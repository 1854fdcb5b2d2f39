import { type ChildProcess, type SpawnOptions, spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

/**
 * How hooks and the bash tool are started.
 * - `namespace`: through `unshare` into fresh user, PID and mount namespaces with their own /proc, so the
 *   child sees no process of the host: not agentd (`/proc/$PPID/environ`, `/proc/<pid>/environ`), not
 *   anything else. Needs util-linux `unshare` and user namespaces (works for root and non-root alike).
 * - `none`: a plain child process. Its environment is still scrubbed, but it can read the environment of
 *   every process of the same user through /proc, agentd's included.
 */
export type ChildIsolation = 'namespace' | 'none';

/** An isolation, or how to choose it when the first child starts (the runtime probes `unshare` then). */
export type IsolationChoice = ChildIsolation | (() => ChildIsolation);

const unshareCandidates = ['/usr/bin/unshare', '/bin/unshare'];
const namespaceArgs = ['--user', '--map-current-user', '--fork', '--pid', '--mount-proc', '--kill-child'];

let probed: string | null | undefined;

/** The `unshare` binary when namespaces actually work on this machine (probed once), else null. */
export function namespaceLauncher(): string | null {
  if (probed !== undefined) return probed;
  probed = null;
  for (const candidate of unshareCandidates) {
    if (!existsSync(candidate)) continue;
    const result = spawnSync(candidate, [...namespaceArgs, '--', '/bin/sh', '-c', 'exit 0'], {
      env: { PATH: '/usr/bin:/bin' },
      stdio: 'ignore',
      timeout: 5000,
    });
    if (result.status === 0) {
      probed = candidate;
      break;
    }
  }
  return probed;
}

/**
 * The whole environment a hook or bash command gets: an allow-list of harmless variables of agentd's own
 * (PATH, LANG, TZ), HOME, and what the operator configured explicitly. Nothing else of agentd's
 * environment (provider keys, tokens, database URLs) is ever copied.
 */
export function childEnvironment(options: {
  home: string;
  configured?: Record<string, string>;
  extra?: Record<string, string>;
}): Record<string, string> {
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    HOME: options.home,
    LANG: process.env.LANG ?? 'C.UTF-8',
  };
  if (process.env.TZ) env.TZ = process.env.TZ;
  return { ...env, ...options.configured, ...options.extra };
}

/** `spawn`, through the namespace launcher when `isolation` is `namespace`. */
export function spawnIsolated(
  command: string,
  args: string[],
  options: SpawnOptions & { isolation: IsolationChoice },
): ChildProcess {
  const { isolation: choice, ...spawnOptions } = options;
  const isolation = typeof choice === 'function' ? choice() : choice;
  if (isolation === 'none') return spawn(command, args, spawnOptions);
  const launcher = namespaceLauncher();
  // The runtime probes before choosing `namespace`; reaching this means the machine changed under us.
  if (!launcher) throw new Error('namespace isolation was requested but unshare does not work here');
  return spawn(launcher, [...namespaceArgs, '--', command, ...args], spawnOptions);
}
