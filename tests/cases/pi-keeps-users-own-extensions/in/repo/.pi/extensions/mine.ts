export default function (pi) {
  pi.on("session_start", async () => {});
}
