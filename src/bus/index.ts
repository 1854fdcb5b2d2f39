export { type Bus, type BusFilter, type BusHandler, type CreateBusOptions, createBus } from './bus.js';
export type { BusEvent, BusEventMap, BusEventScope, BusEventType } from './events.js';
