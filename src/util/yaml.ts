import { createRequire } from 'node:module';

type YamlModule = typeof import('yaml');
let yaml: YamlModule | undefined;

/**
 * The YAML parser, loaded when a document is first read or written rather than with the modules that use
 * it: a runtime starts without its 70 files (about 50 ms) unless it has an `agentd.yaml` or workflows to
 * read, and loads them with the first turn that lists the skills. Required, not imported: on Node the
 * package is CommonJS either way.
 */
export function yamlParser(): YamlModule {
  yaml ??= createRequire(import.meta.url)('yaml') as YamlModule;
  return yaml;
}
