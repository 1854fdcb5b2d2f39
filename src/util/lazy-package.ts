import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/**
 * A CommonJS package, required the first time it is asked for rather than imported with the module that
 * uses it: a process that never needs it (a CLI command, a runtime on SQLite) starts without it. Required,
 * not imported: the ES module wrappers of these packages re-export the same object, and take longer to
 * load (`ws`'s twice as long here).
 */
export function lazyPackage<T>(name: string): () => T {
  let loaded: T | undefined;
  return () => {
    loaded ??= require(name) as T;
    return loaded;
  };
}

/**
 * The YAML parser, loaded with the first document read or written: a runtime with no `agentd.yaml` or
 * workflow starts without its 70 files (about 50 ms), and loads them with the first turn that lists the
 * skills' front matter.
 */
export const yamlParser = lazyPackage<typeof import('yaml')>('yaml');
