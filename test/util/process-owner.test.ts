import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { afterEach, expect, it } from 'vitest';
import { closeOwner, openOwner, ownerMayBeAlive } from '../../src/util/index.js';

const children: Array<ReturnType<typeof spawn>> = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
});

const startTicks = (pid: number) => {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]!;
};

it('counts an owner of this process alive until it is closed', () => {
  const owner = openOwner();
  expect(owner.startsWith(`${hostname()}/${process.pid}/`)).toBe(true);
  expect(ownerMayBeAlive(owner)).toBe(true);
  closeOwner(owner);
  expect(ownerMayBeAlive(owner)).toBe(false);
});

it("tells a live process from one that reused its pid, by the process's start time", async () => {
  const child = spawn('sleep', ['30']);
  children.push(child);
  await new Promise((resolve) => child.once('spawn', resolve));
  const pid = child.pid!;
  const started = startTicks(pid);
  expect(ownerMayBeAlive(`${hostname()}/${pid}/x@${started}`)).toBe(true);
  // The same pid under another start time: the process that wrote the rows is gone.
  expect(ownerMayBeAlive(`${hostname()}/${pid}/x@${Number(started) + 1}`)).toBe(false);
  // A name from before start times were written: the pid alone.
  expect(ownerMayBeAlive(`${hostname()}/${pid}/x`)).toBe(true);
  child.kill('SIGKILL');
  await new Promise((resolve) => child.once('exit', resolve));
  expect(ownerMayBeAlive(`${hostname()}/${pid}/x@${started}`)).toBe(false);
  expect(ownerMayBeAlive(`${hostname()}/${pid}/x`)).toBe(false);
});

it('counts a process that exited and was not reaped yet (a zombie) gone', async () => {
  // The shell execs nothing and outlives its child without waiting for it: the child stays a zombie.
  const parent = spawn('sh', ['-c', 'sleep 0 & echo $!; exec sleep 30']);
  children.push(parent);
  const pid = Number(
    await new Promise<string>((resolve) => parent.stdout!.once('data', (data) => resolve(String(data)))),
  );
  for (
    let tries = 0;
    tries < 100 && readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]![0] !== 'Z';
    tries++
  )
    await new Promise((resolve) => setTimeout(resolve, 10));
  expect(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]![0]).toBe('Z');
  expect(ownerMayBeAlive(`${hostname()}/${pid}/x@${startTicks(pid)}`)).toBe(false);
  expect(ownerMayBeAlive(`${hostname()}/${pid}/x`)).toBe(false);
});

it('counts a name that is no process id gone, and another host as told', () => {
  for (const pid of ['0', '-1', 'abc', '1.5', ''])
    expect(ownerMayBeAlive(`${hostname()}/${pid}/x`), `pid ${pid}`).toBe(false);
  expect(ownerMayBeAlive('another-host/1/x')).toBe(true);
  expect(ownerMayBeAlive('another-host/1/x', { otherHostsAlive: false })).toBe(false);
});
