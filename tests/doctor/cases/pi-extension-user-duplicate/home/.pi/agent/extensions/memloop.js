// memloop pi extension v1
export default function () {}
