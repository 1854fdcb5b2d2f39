export {
  createIdentityLoader,
  type IdentityLayer,
  type IdentityLoader,
  type IdentityLoaderOptions,
  type IdentityPacket,
  type ShadowedHeading,
} from './loader.js';
export { type MarkdownSection, splitSections } from './markdown-sections.js';
