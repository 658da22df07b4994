export function App() {
  return <h1>Acme</h1>;
}
