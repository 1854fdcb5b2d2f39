import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';

/** The owners open in this process (`ownerMayBeAlive`). */
const openOwners = new Set<string>();
const thisHost = hostname();

/**
 * A process-wide unique name for rows one part of this process writes and only it may act on while it lives
 * (`<host>/<pid>/<uuid>`), open until `closeOwner`. Not from an injected id generator: a test's sequential
 * ids would give two owners of one process the same name.
 */
export function openOwner(): string {
  const owner = `${thisHost}/${process.pid}/${randomUUID()}`;
  openOwners.add(owner);
  return owner;
}

/** The owner's rows are now another's to take: it will not act on them again. */
export function closeOwner(owner: string): void {
  openOwners.delete(owner);
}

/**
 * Whether the owner that wrote rows (`openOwner`'s name) may still act on them: one of this process not yet
 * closed, a live process on this host, or any process on another host, which this one cannot see (that
 * host's next process takes its rows back). With `otherHostsAlive: false` another host's owner counts as
 * gone: for rows that must not wait for a host that may never start again (a container made anew gets a
 * new host name).
 */
export function ownerMayBeAlive(owner: string, options: { otherHostsAlive?: boolean } = {}): boolean {
  const [host, pidText] = owner.split('/', 2);
  if (host !== thisHost) return options.otherHostsAlive ?? true;
  const pid = Number(pidText);
  if (pid === process.pid) return openOwners.has(owner);
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: alive, and another user's.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
