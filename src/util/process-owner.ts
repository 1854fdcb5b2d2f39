import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';

/** The owners open in this process (`ownerMayBeAlive`). */
const openOwners = new Set<string>();
const thisHost = hostname();

/**
 * Process `pid` as Linux shows it (`/proc/<pid>/stat`): whether it has exited (a zombie its parent has not
 * reaped yet still answers signals) and when it started, in clock ticks since boot (field 22). Undefined where
 * there is no such file (not Linux, or no such process). A pid is reused once its process is gone; the start
 * time tells the new process from the one that wrote the rows.
 */
function procStat(pid: number): { exited: boolean; startTicks: string | undefined } | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The command name (field 2) is in parentheses and may hold spaces: count fields after its last `)`.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { exited: fields[0] === 'Z' || fields[0] === 'X', startTicks: fields[19] };
}

const ownStart = procStat(process.pid)?.startTicks;

/**
 * A process-wide unique name for rows one part of this process writes and only it may act on while it lives
 * (`<host>/<pid>/<uuid>`, with `@<start ticks>` where the process's start time can be read), open until
 * `closeOwner`. Not from an injected id generator: a test's sequential ids would give two owners of one
 * process the same name.
 */
export function openOwner(): string {
  const owner = `${thisHost}/${process.pid}/${randomUUID()}${ownStart === undefined ? '' : `@${ownStart}`}`;
  openOwners.add(owner);
  return owner;
}

/** The owner's rows are now another's to take: it will not act on them again. */
export function closeOwner(owner: string): void {
  openOwners.delete(owner);
}

/**
 * Whether the owner that wrote rows (`openOwner`'s name) may still act on them: one of this process not yet
 * closed, a live process on this host (the same process: where the name carries its start time, a process
 * that reused its pid is not it), or any process on another host, which this one cannot see (that host's next
 * process takes its rows back). With `otherHostsAlive: false` another host's owner counts as gone: for rows
 * that must not wait for a host that may never start again (a container made anew gets a new host name).
 * A name whose pid is not a process id (a row written by hand) counts as gone.
 */
export function ownerMayBeAlive(owner: string, options: { otherHostsAlive?: boolean } = {}): boolean {
  const [host, pidText, rest = ''] = owner.split('/', 3);
  if (host !== thisHost) return options.otherHostsAlive ?? true;
  const pid = Number(pidText);
  // 0 and negative numbers name process groups to `kill`, which would always answer.
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  if (pid === process.pid) return openOwners.has(owner);
  const stat = procStat(pid);
  if (stat?.exited) return false;
  const at = rest.lastIndexOf('@');
  if (at >= 0 && stat?.startTicks !== undefined) return stat.startTicks === rest.slice(at + 1);
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: alive, and another user's.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
