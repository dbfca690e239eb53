// The module hooks sdk.mjs registers: `openai` and `openai/<path>`, imported by the scripts of this
// folder (not by the packages in its node_modules), resolve in the package named by `target`.
let target = "openai";
const here = new URL("./", import.meta.url).href;

export async function initialize(data) {
  target = data.target;
}

export async function resolve(specifier, context, nextResolve) {
  const parent = context.parentURL ?? "";
  const ours = parent.startsWith(here) && !parent.slice(here.length).startsWith("node_modules/");
  if (ours && (specifier === "openai" || specifier.startsWith("openai/"))) {
    return nextResolve(target + specifier.slice("openai".length), context);
  }
  return nextResolve(specifier, context);
}
