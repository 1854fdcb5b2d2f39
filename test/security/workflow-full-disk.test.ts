// A workflow whose tool fills the disk under agentd's store, run by the built CLI (`agentd run`): the run
// ends, but its records cannot be written, and the command must say so rather than report a stored run.
// The disk is a 3 MiB tmpfs mounted in a user and mount namespace of its own (`unshare -rm`), so the test
// needs no root; where the machine allows no such namespace it is skipped.
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const bin = fileURLToPath(new URL('../../bin/agentd.js', import.meta.url));
const fixture = fileURLToPath(new URL('./fixtures/fill-disk', import.meta.url));

const canMountTmpfs = (() => {
  const dir = mkdtempSync(join(tmpdir(), 'agentd-tmpfs-probe-'));
  const probe = spawnSync('unshare', ['-rm', 'sh', '-c', `mount -t tmpfs -o size=1m tmpfs ${dir}`]);
  return probe.status === 0;
})();

describe('agentd run when a workflow fills the disk under the store', () => {
  it.skipIf(!canMountTmpfs)(
    'exits 3 and names the records it could not write; the run it reported is not in the store',
    () => {
      const outside = mkdtempSync(join(tmpdir(), 'agentd-full-disk-'));
      const disk = join(outside, 'disk');
      mkdirSync(disk);
      cpSync(fixture, join(outside, 'workflow'), { recursive: true });
      const cli = (args: string, out: string) =>
        `${JSON.stringify(process.execPath)} ${JSON.stringify(bin)} ${args} >${out}.out 2>${out}.err; echo $? >${out}.code`;
      // The home is made (and its store migrated) by a first run while the disk has room; the second
      // run's tool then fills the disk, and the run's records come after.
      const script = [
        `mount -t tmpfs -o size=3m tmpfs ${disk} || exit 90`,
        `cp -r ${join(outside, 'workflow')} ${disk}/workflow`,
        `cd ${disk}/workflow`,
        `export AGENTD_HOME=${disk}/home AGENTD_LOG_LEVEL=silent`,
        cli(`run . --input '{"dir":"${disk}/unused"}' --json --quiet`, `${outside}/first`),
        cli(`run . --input '{"dir":"${disk}/workflow"}' --json --quiet`, `${outside}/full`),
        // Room again, so that a read of the store can open it (agentd refuses to start on a full disk).
        `rm ${disk}/workflow/filler-*`,
        `TASK=$(${JSON.stringify(process.execPath)} -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).taskId)' ${outside}/full.out)`,
        cli('inspect "$TASK" --json', `${outside}/inspect`),
      ].join('\n');
      const ran = spawnSync('unshare', ['-rm', 'sh', '-c', script], { encoding: 'utf8', timeout: 60_000 });
      expect(ran.status, ran.stderr).toBe(0);
      expect(ran.stderr).toBe('');
      const read = (name: string) => readFileSync(join(outside, name), 'utf8');
      const outcome = (name: string) => ({
        code: Number(read(`${name}.code`)),
        out: read(`${name}.out`),
        err: read(`${name}.err`),
      });

      const first = outcome('first');
      expect(first.code, first.err).toBe(0);
      expect(JSON.parse(first.out)).not.toHaveProperty('recordsNotWritten');

      const full = outcome('full');
      const result = JSON.parse(full.out);
      // The run itself ended: its tool filled the disk and returned.
      expect(result).toMatchObject({ status: 'success', output: { bytes: expect.any(Number) } });
      expect(result.recordsNotWritten).toMatchObject({
        code: 'RECORDS_NOT_WRITTEN',
        cause: 'STORE_UNAVAILABLE',
      });
      expect(result.recordsNotWritten.failedWrites).toBeGreaterThan(0);
      expect(full.code).toBe(3);
      expect(full.err).toContain(`task ${result.taskId}:`);
      expect(full.err).toContain('(RECORDS_NOT_WRITTEN)');

      const inspected = outcome('inspect');
      expect(JSON.parse(inspected.out).error.code).toBe('NOT_FOUND');
    },
    90_000,
  );
});
