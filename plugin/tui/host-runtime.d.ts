/**
 * The two modules of OpenCode's TUI runtime this module imports, typed as far as it uses them.
 * OpenCode (1.18.x) serves both to TUI plugins from its own bundle (a Bun plugin maps the specifiers,
 * in node_modules too), so the package depends on neither: declaring them here keeps it that way.
 */
declare module "@opentui/solid/jsx-runtime" {
  /**
   * An element of the host renderer (`box`, `text`, `b`, ...) or a component, with its props. A
   * function child is reactive: it is rendered again when a signal it reads changes.
   */
  export function jsx(type: string | ((props: never) => unknown), props: object): unknown;
}

declare module "solid-js" {
  export type Accessor<T> = () => T;
  export type Setter<T> = (value: T) => T;
  export function createSignal<T>(value: T): [Accessor<T>, Setter<T>];
}
