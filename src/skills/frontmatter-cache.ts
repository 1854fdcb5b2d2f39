import { createHash } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { createKvStore, type SqlDatabase } from '../store/index.js';
import { type Clock, type Logger, yamlParser } from '../util/index.js';
import type { FrontmatterReader } from './frontmatter.js';

const namespace = 'skills.frontmatter';

/** Entries kept past which those the last discovery did not use are forgotten. */
const maxKeptEntries = 256;

/**
 * Longer blocks are parsed every time, never kept: an agent can write skills into the workspace, and a
 * front matter holds a name, a description of at most 1,024 characters and a few fields, so this bounds what
 * the 256 forgotten-but-kept entries can hold.
 */
const maxKeptBlockChars = 16 * 1024;

export interface FrontmatterCache {
  /** Reads a front matter block: from the values kept for the same text, else with the YAML parser. */
  read: FrontmatterReader;
  /** Before a discovery: takes in what the store keeps (other processes may have added to it). */
  load(): Promise<void>;
  /** After a discovery: keeps the blocks read for the first time, and forgets unused ones past the cap. */
  save(): Promise<void>;
}

/**
 * The values of the YAML front matter blocks skill discovery read, kept in the store's key-value table by
 * the SHA-256 of the block's text. A process whose skills did not change since one read them validates
 * their front matter without loading the YAML parser (its 73 files: a served process's first turn took 67
 * ms with it, 43 without, here). The values go through the same schema as freshly parsed ones; a block is kept only when JSON
 * carries its values unchanged (not `.inf`, `.nan` or `-0`) and it is at most 16 KiB, and a store that cannot
 * be read or written (a full disk) costs a parse, never a skill.
 */
export function createFrontmatterCache(options: {
  db: SqlDatabase;
  clock: Clock;
  logger: Logger;
}): FrontmatterCache {
  const kv = createKvStore(options.db, { clock: options.clock });
  const known = new Map<string, string>();
  const fresh = new Map<string, string>();
  const used = new Set<string>();

  const read: FrontmatterReader = (block) => {
    const key = createHash('sha256').update(block).digest('base64url');
    used.add(key);
    const kept = known.get(key);
    if (kept !== undefined) {
      try {
        return JSON.parse(kept);
      } catch {
        // A damaged row: the block is parsed again and its row rewritten.
        known.delete(key);
      }
    }
    const values: unknown = yamlParser().parse(block);
    if (block.length > maxKeptBlockChars) return values;
    const json = JSON.stringify(values);
    if (json !== undefined && isDeepStrictEqual(JSON.parse(json), values)) {
      known.set(key, json);
      fresh.set(key, json);
    }
    return values;
  };

  return {
    read,
    async load() {
      used.clear();
      try {
        for (const entry of await kv.list(namespace)) known.set(entry.key, entry.value);
      } catch (error) {
        options.logger.debug({ err: error }, 'skills: kept front matter could not be read');
      }
    },
    async save() {
      const unused = known.size > maxKeptEntries ? [...known.keys()].filter((key) => !used.has(key)) : [];
      if (fresh.size === 0 && unused.length === 0) return;
      const writes = [...fresh];
      fresh.clear();
      for (const key of unused) known.delete(key);
      try {
        await options.db.transaction(async (tx) => {
          for (const [key, json] of writes) await kv.set(namespace, key, json, tx);
          for (const key of unused) await kv.delete(namespace, key, tx);
        });
      } catch (error) {
        options.logger.debug({ err: error }, 'skills: front matter could not be kept');
      }
    },
  };
}
